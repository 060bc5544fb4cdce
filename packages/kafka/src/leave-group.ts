import net from 'node:net';

/**
 * LeaveGroup on behalf of a consumer-group member that died without leaving (kill -9).
 *
 * kafkajs has no static membership, so the coordinator keeps a dead member, and its partitions,
 * until the member's session times out (6 s), and a restarted process joins under a new member
 * id that the rebalance makes wait for the old one. Whoever saw the process die (the supervisor,
 * or the process itself when it starts again) knows the member ids it had (see MemberLedger) and
 * removes them at once: the survivors rebalance at their next heartbeat.
 *
 * kafkajs does not expose LeaveGroup for another member, so this speaks the three requests it
 * needs itself, in their non-flexible versions (ApiVersions v0, FindCoordinator v1–v2, LeaveGroup
 * v1–v3), picked from the broker's ApiVersions answer.
 */
export interface GroupMember {
  groupId: string;
  memberId: string;
}

const API_VERSIONS = 18;
const FIND_COORDINATOR = 10;
const LEAVE_GROUP = 13;
/** The member is already gone (it left, or its session ran out): what we wanted. */
const UNKNOWN_MEMBER_ID = 25;
const RETRIABLE = new Set([14 /* COORDINATOR_LOAD_IN_PROGRESS */, 15 /* COORDINATOR_NOT_AVAILABLE */, 16 /* NOT_COORDINATOR */]);

/** Encodes Kafka's primitive types (big-endian, int16-length strings). */
export class RequestWriter {
  private readonly parts: Buffer[] = [];

  int8(v: number): this {
    const b = Buffer.alloc(1);
    b.writeInt8(v);
    this.parts.push(b);
    return this;
  }

  int16(v: number): this {
    const b = Buffer.alloc(2);
    b.writeInt16BE(v);
    this.parts.push(b);
    return this;
  }

  int32(v: number): this {
    const b = Buffer.alloc(4);
    b.writeInt32BE(v);
    this.parts.push(b);
    return this;
  }

  string(v: string | null): this {
    if (v === null) return this.int16(-1);
    const s = Buffer.from(v, 'utf8');
    this.int16(s.length);
    this.parts.push(s);
    return this;
  }

  bytes(): Buffer {
    return Buffer.concat(this.parts);
  }
}

export class ResponseReader {
  private at = 0;
  constructor(private readonly buf: Buffer) {}

  int16(): number {
    const v = this.buf.readInt16BE(this.at);
    this.at += 2;
    return v;
  }

  int32(): number {
    const v = this.buf.readInt32BE(this.at);
    this.at += 4;
    return v;
  }

  string(): string | null {
    const len = this.int16();
    if (len < 0) return null;
    const v = this.buf.toString('utf8', this.at, this.at + len);
    this.at += len;
    return v;
  }
}

/** A size-prefixed request with header v1 (api key, version, correlation id, client id). */
export function frameRequest(apiKey: number, version: number, correlationId: number, clientId: string, body: Buffer): Buffer {
  const header = new RequestWriter().int16(apiKey).int16(version).int32(correlationId).string(clientId).bytes();
  const size = Buffer.alloc(4);
  size.writeInt32BE(header.length + body.length);
  return Buffer.concat([size, header, body]);
}

export function encodeLeaveGroup(version: number, groupId: string, memberIds: readonly string[]): Buffer {
  const w = new RequestWriter().string(groupId);
  if (version < 3) return w.string(memberIds[0]!).bytes();
  w.int32(memberIds.length);
  for (const id of memberIds) w.string(id).string(null); // no group_instance_id: kafkajs has none
  return w.bytes();
}

/** The error code of a LeaveGroup response (v3: the first member error when the top level is 0). */
export function decodeLeaveGroup(version: number, body: Buffer): number {
  const r = new ResponseReader(body);
  if (version >= 1) r.int32(); // throttle_time_ms
  const top = r.int16();
  if (version < 3 || top !== 0) return top;
  const n = r.int32();
  for (let i = 0; i < n; i++) {
    r.string();
    r.string();
    const code = r.int16();
    if (code !== 0) return code;
  }
  return 0;
}

export function decodeApiVersions(body: Buffer): Map<number, { min: number; max: number }> {
  const r = new ResponseReader(body);
  const error = r.int16();
  if (error !== 0) throw new Error(`ApiVersions failed with Kafka error ${error}`);
  const out = new Map<number, { min: number; max: number }>();
  const n = r.int32();
  for (let i = 0; i < n; i++) out.set(r.int16(), { min: r.int16(), max: r.int16() });
  return out;
}

/** The highest version both sides speak, within [lo, hi] (the non-flexible ones encoded here). */
export function pickVersion(range: { min: number; max: number } | undefined, lo: number, hi: number, api: string): number {
  const v = Math.min(hi, range?.max ?? -1);
  if (v < Math.max(lo, range?.min ?? 0)) throw new Error(`the broker speaks no ${api} version in ${lo}…${hi}`);
  return v;
}

/** One broker connection: requests in sequence, responses matched by correlation id. */
class BrokerConnection {
  private readonly socket: net.Socket;
  private pending = Buffer.alloc(0);
  private waiting: { id: number; resolve: (b: Buffer) => void; reject: (e: Error) => void } | undefined;
  private nextId = 1;
  private readonly opened: Promise<void>;

  constructor(host: string, port: number, timeoutMs: number) {
    this.socket = net.connect({ host, port });
    this.socket.setNoDelay(true);
    this.socket.setTimeout(timeoutMs, () => this.socket.destroy(new Error(`no answer from ${host}:${port} within ${timeoutMs} ms`)));
    this.opened = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.socket.on('data', (chunk) => this.onData(chunk));
    this.socket.on('error', (err) => this.waiting?.reject(err));
    this.socket.on('close', () => this.waiting?.reject(new Error(`connection to ${host}:${port} closed`)));
  }

  private onData(chunk: Buffer): void {
    this.pending = Buffer.concat([this.pending, chunk]);
    if (this.pending.length < 4) return;
    const size = this.pending.readInt32BE(0);
    if (this.pending.length < 4 + size) return;
    const frame = this.pending.subarray(4, 4 + size);
    this.pending = this.pending.subarray(4 + size);
    const w = this.waiting;
    this.waiting = undefined;
    if (!w) return;
    if (frame.readInt32BE(0) !== w.id) w.reject(new Error('response out of order'));
    else w.resolve(frame.subarray(4)); // response header v0: the correlation id alone
  }

  async request(apiKey: number, version: number, body: Buffer): Promise<Buffer> {
    await this.opened;
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting = { id, resolve, reject };
      this.socket.write(frameRequest(apiKey, version, id, 'reach-leave-group', body));
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  return { host: address.slice(0, i), port: Number(address.slice(i + 1)) };
}

async function withBroker<T>(
  address: string,
  timeoutMs: number,
  fn: (c: BrokerConnection, apis: Map<number, { min: number; max: number }>) => Promise<T>,
): Promise<T> {
  const { host, port } = hostPort(address);
  const conn = new BrokerConnection(host, port, timeoutMs);
  try {
    const apis = decodeApiVersions(await conn.request(API_VERSIONS, 0, Buffer.alloc(0)));
    return await fn(conn, apis);
  } finally {
    conn.close();
  }
}

async function findCoordinator(brokers: readonly string[], groupId: string, timeoutMs: number): Promise<string> {
  let last: Error | undefined;
  for (const address of brokers) {
    try {
      return await withBroker(address, timeoutMs, async (conn, apis) => {
        const v = pickVersion(apis.get(FIND_COORDINATOR), 1, 2, 'FindCoordinator');
        const r = new ResponseReader(await conn.request(FIND_COORDINATOR, v, new RequestWriter().string(groupId).int8(0).bytes()));
        r.int32(); // throttle_time_ms
        const error = r.int16();
        const message = r.string();
        r.int32(); // node_id
        const host = r.string();
        const port = r.int32();
        if (error !== 0) throw Object.assign(new Error(`FindCoordinator: Kafka error ${error}${message ? ` (${message})` : ''}`), { code: error });
        return `${host}:${port}`;
      });
    } catch (err) {
      last = err as Error;
    }
  }
  throw last ?? new Error('no brokers given');
}

/**
 * Removes the given members from their groups. Members already gone count as removed. Retries
 * while the coordinator moves or loads (a broker restart), up to `deadlineMs`; throws the last
 * error after that, so a caller can log it (takeover then waits out the session instead).
 */
export async function leaveGroupMembers(
  brokers: readonly string[],
  members: readonly GroupMember[],
  opts: { timeoutMs?: number; deadlineMs?: number } = {},
): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 2_000;
  const until = Date.now() + (opts.deadlineMs ?? 5_000);
  const byGroup = new Map<string, string[]>();
  for (const m of members) byGroup.set(m.groupId, [...(byGroup.get(m.groupId) ?? []), m.memberId]);
  for (const [groupId, memberIds] of byGroup) {
    for (let attempt = 0; ; attempt++) {
      try {
        const coordinator = await findCoordinator(brokers, groupId, timeoutMs);
        await withBroker(coordinator, timeoutMs, async (conn, apis) => {
          const v = pickVersion(apis.get(LEAVE_GROUP), 1, 3, 'LeaveGroup');
          // Before v3 one member per request.
          for (const ids of v >= 3 ? [memberIds] : memberIds.map((id) => [id])) {
            const code = decodeLeaveGroup(v, await conn.request(LEAVE_GROUP, v, encodeLeaveGroup(v, groupId, ids)));
            if (code !== 0 && code !== UNKNOWN_MEMBER_ID) throw Object.assign(new Error(`LeaveGroup ${groupId}: Kafka error ${code}`), { code });
          }
        });
        break;
      } catch (err) {
        const code = (err as { code?: number }).code;
        const retriable = code === undefined || RETRIABLE.has(code);
        if (!retriable || Date.now() > until) throw err;
        await new Promise((r) => setTimeout(r, Math.min(500, 50 * 2 ** attempt)));
      }
    }
  }
}

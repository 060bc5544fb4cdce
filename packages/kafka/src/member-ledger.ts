import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Kafka } from 'kafkajs';
import { leaveGroupMembers, type GroupMember } from './leave-group.js';

/**
 * A process's consumer-group member ids, kept in a file (REACH_MEMBER_FILE) so that when the
 * process dies without leaving, whoever notices removes them from their groups at once instead
 * of the coordinator waiting out their sessions (see leave-group.ts): the supervisor as soon as
 * the process exits, and the process itself when it starts again (a restart by another
 * supervisor, e.g. an orchestrator that keeps the file on a volume).
 *
 * The file holds the latest member id of every group the process joined; each join rewrites it
 * (atomically: temp file + rename, so a kill mid-write leaves the previous version).
 */
export class MemberLedger {
  private readonly members = new Map<string, string>();

  constructor(readonly file: string) {}

  joined(groupId: string, memberId: string): void {
    if (this.members.get(groupId) === memberId) return;
    this.members.set(groupId, memberId);
    mkdirSync(dirname(this.file), { recursive: true });
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify([...this.members].map(([g, m]) => ({ groupId: g, memberId: m }))));
    renameSync(tmp, this.file);
  }
}

export function readMemberFile(file: string): GroupMember[] {
  if (!existsSync(file)) return [];
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    return Array.isArray(parsed) ? parsed.filter((m): m is GroupMember => typeof m?.groupId === 'string' && typeof m?.memberId === 'string') : [];
  } catch {
    return []; // unreadable: nothing to leave, sessions time out as without a ledger
  }
}

/** Leaves the members a dead process recorded (through `kafka`'s brokers and security), then removes its file. Resolves to how many there were. */
export async function leaveRecordedMembers(file: string, kafka: Kafka, opts?: { deadlineMs?: number }): Promise<number> {
  const members = readMemberFile(file);
  if (members.length > 0) await leaveGroupMembers(kafka, members, opts);
  rmSync(file, { force: true });
  return members.length;
}

const ledgers = new WeakMap<Kafka, MemberLedger>();

/** Consumers created from this client record their memberships in `ledger` (createStageConsumer). */
export function attachMemberLedger(kafka: Kafka, ledger: MemberLedger): void {
  ledgers.set(kafka, ledger);
}

export function memberLedgerOf(kafka: Kafka): MemberLedger | undefined {
  return ledgers.get(kafka);
}

import { NonRetryableError, ReachError, newId, newMessageId, type Logger } from '@reach/core';
import type { DispatcherConnection } from './agent-connection.js';
import type { AgentFrame, DeliverFrame } from './frames.js';
import { isStopping, type NodeState } from './node-state.js';
import { RECEIPT, TASK_REQUEST, TASK_RESULT, type AgentNodeOptions, type NodeEvents, type Reply, type RequestOptions, type SendOptions } from './node-types.js';
import { envelopeFields } from './payload.js';
import { receiptOf, type PendingRequests } from './pending-requests.js';
import type { RouteKind, RoutesView } from './routes-view.js';
import { contextToHeaders } from './session.js';
import type { RegistryApi } from './transport.js';
import type { SendFields } from './types.js';

export interface AgentSenderDeps {
  connection: DispatcherConnection;
  registry: RegistryApi;
  requests: PendingRequests;
  /** What this agent can reach, from the dispatcher's `routes` frames (pre-flight, R-G6). */
  routes: RoutesView;
  options: Pick<AgentNodeOptions, 'preflight' | 'sendTimeoutMs' | 'requestTimeoutMs' | 'token'>;
  state: () => NodeState;
  agentId: () => string | undefined;
  /** The agent's current token. */
  token: () => string | undefined;
  /** A failure receipt for a message this node sent (the node's `receipt` event). */
  onReceipt: (receipt: NodeEvents['receipt']) => void;
}

/** The SendOptions that become envelope fields. */
export function sendFields(options: SendOptions): Partial<SendFields> {
  return {
    session_id: options.sessionId,
    headers: options.headers,
    priority: options.priority,
    idempotency_key: options.idempotencyKey,
    trace_id: options.traceId,
    traceparent: options.traceparent,
    tags: options.tags,
  };
}

/**
 * What the node sends and asks (AgentNode's send, request, canReach): envelopes checked and
 * built here, pre-flight against the routes view (else the registry), requests waiting for
 * their task_result in PendingRequests, failure receipts; the frames go out through the connection.
 */
export class AgentSender {
  constructor(private readonly d: AgentSenderDeps) {}

  send(fields: SendFields, options: { preflight?: boolean }): Promise<string> {
    if (isStopping(this.d.state())) {
      return Promise.reject(new ReachError('CONNECTION_CLOSED', 'the agent node is stopped'));
    }
    const targets = [fields.capability, fields.topic, fields.target_agent_id].filter((t) => t !== undefined && t !== null && t !== '');
    if (targets.length !== 1) {
      return Promise.reject(new NonRetryableError('INVALID_ENVELOPE', `exactly one of capability, topic, target_agent_id must be set (got ${targets.length})`));
    }
    if (options.preflight === true && this.preflightOn) {
      // A message with expire_at may wait for an agent: the router parks it rather than refuse it.
      const mayWait = fields.expire_at !== undefined && fields.expire_at !== null;
      const refused = fields.capability
        ? this.d.routes.refusal('capability', fields.capability, { mayWait })
        : fields.topic
          ? this.d.routes.refusal('topic', fields.topic, { mayWait })
          : undefined;
      if (refused) return Promise.reject(refused);
    }
    const clientRef = newId('ref');
    // The id is chosen here so a request can wait for its answer before the send completes.
    const body = envelopeFields({ ...fields, message_id: fields.message_id ?? newMessageId() });
    const producer = this.d.agentId();
    if (producer) body.producer = producer;
    const frame = { ...body, type: 'send', client_ref: clientRef } as AgentFrame & { client_ref: string };
    return this.d.connection.send(frame, String(body.message_id), this.d.options.sendTimeoutMs ?? 10_000);
  }

  async requestReply<R>(capability: string, payload: unknown, options: RequestOptions): Promise<Reply<R>> {
    const agentId = this.d.agentId();
    if (!agentId) throw new ReachError('CONNECTION_CLOSED', 'request() needs a started node (reply_to is this agent)');
    if ((options.preflight ?? true) && this.preflightOn) {
      // The local view when the dispatcher sent one (no round trip; 2001, 2003 or 3001), else the registry.
      const refused = this.d.routes.refusal('capability', capability);
      if (refused) throw refused;
      if (this.d.routes.verdict('capability', capability) === undefined && !(await this.registryOffers(capability))) {
        throw new NonRetryableError('NO_ROUTE', `no live agent offers ${capability}`, { details: { capability } });
      }
    }
    const timeoutMs = options.timeoutMs ?? this.d.options.requestTimeoutMs ?? 30_000;
    const messageId = newMessageId();
    const context = options.context ?? {};
    const reply = this.d.requests.wait<R>(messageId, capability, context, timeoutMs);
    try {
      await this.send(
        {
          ...sendFields(options),
          message_id: messageId,
          message_type: TASK_REQUEST,
          capability,
          payload,
          reply_to: agentId,
          timeout_ms: timeoutMs,
          headers: { ...options.headers, ...contextToHeaders(context) },
        },
        {},
      );
    } catch (err) {
      this.d.requests.forget(messageId);
      throw err;
    }
    return reply;
  }

  /**
   * Answers to this node's own sends are settled here and never reach a handler: failure
   * receipts, and the task_results of its requests. True when `d` was one (the node acks it).
   */
  settle(d: DeliverFrame, log: Logger): boolean {
    const m = d.message;
    if (m.message_type === RECEIPT) {
      const receipt = receiptOf(m);
      log.info({ about_message_id: receipt.message_id, code: receipt.code, status: receipt.status }, 'failure receipt');
      this.d.requests.settleReceipt(receipt);
      this.d.onReceipt(receipt);
      return true;
    }
    if (m.message_type === TASK_RESULT && m.correlation_id && this.d.requests.has(m.correlation_id)) {
      this.d.requests.settleResult(m);
      return true;
    }
    return false;
  }

  async canReach(name: string, kind: RouteKind): Promise<boolean> {
    const verdict = this.d.routes.verdict(kind, name);
    if (verdict !== undefined) return verdict === 0;
    return kind === 'capability' ? this.registryOffers(name) : true;
  }

  private get preflightOn(): boolean {
    return this.d.options.preflight ?? true;
  }

  private async registryOffers(capability: string): Promise<boolean> {
    const agents = await this.d.registry.list({ capability }, this.d.token() ?? this.d.options.token);
    return agents.some((a) => (a.status ?? 'ONLINE') === 'ONLINE');
  }
}

/**
 * Every header name Agent-Reach reads or writes, in one place: Kafka record headers, the
 * envelope's own `headers` map, and HTTP headers (docs/design.md §2–3, docs/pipeline.md). Code
 * uses these names, never the string, so a name is spelt once. The Python SDK keeps its own
 * copies (sdks/python/src/agent_reach: RESULT_STATUS_HEADER, CONTEXT_HEADER_PREFIX,
 * "idempotency-key", "retry-after"); test/unit/sdk checks they match.
 */

// Kafka record headers.

/** reach.ingress.v1: the producing agent's token (docs/design.md §2); never stored or shown. */
export const TOKEN_HEADER = 'reach-token';
/** reach.ingress.v1 (a replay) and reach.pending.v1: the delivery attempt, decimal (docs/pipeline.md). */
export const ATTEMPT_HEADER = 'reach-attempt';
/** reach.pending.v1: agents a retry should avoid, comma-separated (failover, R-B9). */
export const EXCLUDE_HEADER = 'reach-exclude-agents';
/** W3C Trace Context, on Kafka records and on HTTP requests alike (R-F1). */
export const TRACEPARENT_HEADER = 'traceparent';
/** reach.dlq.v1: the producer, code, reason and trace id of a dead-letter entry. */
export const DLQ_PRODUCER_HEADER = 'reach-producer';
export const DLQ_CODE_HEADER = 'reach-code';
export const DLQ_REASON_HEADER = 'reach-reason';
export const DLQ_TRACE_ID_HEADER = 'reach-trace-id';
/** reach.poison.v1: why a record could not be handled, by which service, and where it came from. */
export const POISON_ERROR_HEADER = 'reach-poison-error';
export const POISON_SERVICE_HEADER = 'reach-poison-service';
export const POISON_SOURCE_HEADER = 'reach-poison-source';

// Envelope headers (the envelope's own `headers` map).

/**
 * Set by ingress to the verified token's domain (`dom`), overwriting whatever the sender put
 * there, so the router can check security domains (R-A8) without trusting a header the sender
 * could forge.
 */
export const PRODUCER_DOMAIN_HEADER = 'reach-producer-domain';
/**
 * A dead-letter replay's acceptance time (epoch ms, decimal): its time budget counts from then;
 * created_at stays the message's (docs/pipeline.md, "Replays"). Ingress sets it on replays and
 * drops it from everything else, so no producer can stretch its budget.
 */
export const BUDGET_FROM_HEADER = 'reach-budget-from';
/** On a task_result, set by the dispatcher: the handler's `ok` or `error`. */
export const RESULT_STATUS_HEADER = 'reach-result-status';
/** Prefix of the session context fragments a handler reads and updates (opaque to Agent-Reach). */
export const CONTEXT_HEADER_PREFIX = 'reach-context-';
/** Routing hints the sender may set, read by the router (docs/pipeline.md). */
export const PREFERRED_AGENT = 'reach-preferred-agent';
export const ON_SATURATION = 'reach-on-saturation';
export const CAPABILITY_TAGS = 'reach-capability-tags';
/**
 * Set by the router on each copy of a topic fan-out: the original message id and the agent the
 * copy belongs to. A retried copy comes back through reach.pending.v1 still carrying its
 * topic; these headers route it to its own subscriber again instead of fanning out anew.
 */
export const FANOUT_PARENT = 'reach-fanout-parent';
export const FANOUT_AGENT = 'reach-fanout-agent';
/** The A2A ids a message relayed from A2A carries, so the handling agent sees what it answers. */
export const A2A_MESSAGE_ID_HEADER = 'a2a-message-id';
export const A2A_CONTEXT_ID_HEADER = 'a2a-context-id';

// HTTP headers (lower case, as Node reports them).

/** POST /v1/messages: the sender's idempotency key (R-D5). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** 429 and 503 answers: seconds to wait before trying again. */
export const RETRY_AFTER_HEADER = 'retry-after';
/** Admin calls: who made a change, for the audit trail (optional, declared by the caller). */
export const ACTOR_HEADER = 'reach-actor';
/** HTTP push to an agent endpoint: the agent it is for and the delivery's seq. */
export const PUSH_AGENT_ID_HEADER = 'reach-agent-id';
export const PUSH_SEQ_HEADER = 'reach-seq';
/** The A2A protocol version a request or answer speaks. */
export const A2A_VERSION_HEADER = 'a2a-version';

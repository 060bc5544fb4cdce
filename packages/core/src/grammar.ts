/**
 * The grammars of the names Agent-Reach accepts, in one place: agent ids and the other
 * descriptor names (registration, docs/design.md §1), capability names, and the names an
 * envelope carries. Code tests against these, never a copy of the pattern. The Python SDK
 * checks none of them (the services do).
 */

/** An agent id at registration: a letter or digit, then up to 127 of letters, digits and `._-`. */
export const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const AGENT_TYPE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** A security domain (a descriptor's `domain`, a grant's ends). */
export const DOMAIN_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Tags are free-form labels, but one may never hold a comma: tag filters travel comma-separated. */
export const TAG_PATTERN = /^[^\s,]{1,64}$/;

/**
 * The capability tag grammar (R-A1, R-A2, R-A7) — shared by the registry (validation,
 * index), the router (exact matching) and the SDK (pre-flight checks).
 *
 *   name   = base [ "@" major ]
 *   base   = words [ ":" words ]          verb_object  or  verb:object
 *   words  = word *( "_" word )
 *   word   = [a-z] [a-z0-9]*  (first word)  /  [a-z0-9]+  (later words)
 *   major  = 1*DIGIT
 *
 * Examples: `parse_pdf`, `query:orders`, `query:order_items`, `summarize@2`.
 * Matching is exact on the base (R-B1: `query:orders` never matches `query:order_items`);
 * a pinned major (`summarize@2`) only matches capabilities of that major.
 */
export const CAPABILITY_NAME_PATTERN = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*(?::[a-z0-9]+(?:_[a-z0-9]+)*)?(?:@(?:0|[1-9][0-9]{0,5}))?$/;

/**
 * A name in an envelope (message_type, capability, topic, target_agent_id, producer, reply_to,
 * session_id): a letter or digit, then up to 199 of letters, digits and `_.:-@/`. Wider than
 * AGENT_ID_PATTERN: producers include admin and A2A names. Receipts and quotas are only for
 * names an envelope can carry.
 */
export const ENVELOPE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:\-@/]{0,199}$/;

/** A name given as a query filter (dead-letter entries, audit rows): 1–200 of letters, digits and `_.:@/-`. */
export const NAME_FILTER_PATTERN = /^[A-Za-z0-9_.:@/-]{1,200}$/;

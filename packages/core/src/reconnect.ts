/**
 * The agents' reconnect backoff of the WebSocket protocol (R-G1): 1 s doubling to 32 s,
 * plus up to 20 % jitter so a fleet that lost the same dispatcher does not come back in
 * lockstep. The SDKs back off this way; the dispatcher relies on it to know how long a
 * restarted instance's agents may take to be back.
 */
export const AGENT_RECONNECT_BACKOFF = { baseMs: 1_000, maxMs: 32_000, jitter: 0.2 } as const;

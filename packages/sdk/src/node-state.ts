/** Where an AgentNode is in its life (AgentNode.status); its lease and its connection act on it. */
export type NodeState = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/** True once stop() (or a takeover) began: nothing new starts. */
export function isStopping(state: NodeState): boolean {
  return state === 'stopping' || state === 'stopped';
}

/** An error's message, for the node's log lines. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

import { ERROR } from '@reach/core';
/**
 * The JSON-RPC error codes of A2A 1.0 (spec §5.4 and §9.5): the JSON-RPC 2.0 standard ones and
 * the A2A-specific range -32001 … -32009. An A2aError carries one of them; the JSON-RPC layer
 * turns it into the `error` member of a response.
 */
export const A2A_ERRORS = {
  JSONParseError: { code: -32700, message: 'Invalid JSON payload' },
  InvalidRequestError: { code: -32600, message: 'Request payload validation error' },
  MethodNotFoundError: { code: -32601, message: 'Method not found' },
  InvalidParamsError: { code: -32602, message: 'Invalid parameters' },
  InternalError: { code: -32603, message: 'Internal error' },
  TaskNotFoundError: { code: -32001, message: 'Task not found' },
  TaskNotCancelableError: { code: -32002, message: 'Task cannot be canceled' },
  PushNotificationNotSupportedError: { code: -32003, message: 'Push Notification is not supported' },
  UnsupportedOperationError: { code: -32004, message: 'This operation is not supported' },
  ContentTypeNotSupportedError: { code: -32005, message: 'Incompatible content types' },
  InvalidAgentResponseError: { code: -32006, message: 'Invalid agent response' },
  ExtendedAgentCardNotConfiguredError: { code: -32007, message: 'Extended Agent Card is not configured' },
  ExtensionSupportRequiredError: { code: -32008, message: 'Extension support required' },
  VersionNotSupportedError: { code: -32009, message: 'Protocol version is not supported' },
} as const;

export type A2aErrorName = keyof typeof A2A_ERRORS;

/**
 * Not part of A2A: an authentication failure is "a JSON-RPC custom error" (spec §3.3.2). It is
 * Agent-Reach's own 1003 AUTH_FAILED (ERROR.AUTH_FAILED), named as on every other refusal of a credential.
 */
const AUTH_ERROR_NAME = 'AUTH_FAILED';

export class A2aError extends Error {
  readonly code: number;
  constructor(
    readonly errorName: A2aErrorName | 'AuthenticationError',
    message?: string,
    /** Structured details: the `data` array of the JSON-RPC error, each with an `@type`. */
    readonly data?: readonly Record<string, unknown>[],
  ) {
    const known = errorName === 'AuthenticationError' ? { code: ERROR.AUTH_FAILED, message: 'Authentication failed' } : A2A_ERRORS[errorName];
    super(message ?? known.message);
    this.name = 'A2aError';
    this.code = known.code;
  }

  toJsonRpc(): { code: number; message: string; name?: string; data?: readonly Record<string, unknown>[] } {
    return {
      code: this.code,
      message: this.message,
      ...(this.errorName === 'AuthenticationError' ? { name: AUTH_ERROR_NAME } : {}),
      ...(this.data ? { data: this.data } : {}),
    };
  }
}

/** A `google.rpc.ErrorInfo` detail carrying the Agent-Reach code behind an A2A error. */
export function reachErrorInfo(code: number, name: string, metadata: Record<string, string> = {}): Record<string, unknown> {
  return { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: name, domain: 'agent-reach', metadata: { code: String(code), ...metadata } };
}

import pino from 'pino';
import type { Logger } from '@reach/core';

/**
 * Structured JSON logs, one line per event (docs/design.md §8). Base fields name the service and the
 * instance; per-message loggers add trace_id and message_id (see `forMessage`).
 */
export function createLogger(opts: { service: string; instance: string; level: string }): Logger {
  return pino({
    level: opts.level,
    base: { service: opts.service, instance: opts.instance },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    serializers: { err: pino.stdSerializers.err },
  }) as unknown as Logger;
}

/** A child logger that stamps every line with the message's trace and id. */
export function forMessage(log: Logger, m: { trace_id?: string | null; message_id?: string | null }): Logger {
  return log.child({ trace_id: m.trace_id ?? undefined, message_id: m.message_id ?? undefined });
}

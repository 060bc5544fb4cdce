import type { Logger, LogFn } from '@reach/core';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

/** A minimal stderr logger for CLI commands: warnings and errors only unless asked. */
export function createLogger(level = 'warn'): Logger {
  const min = LEVELS.indexOf(level as (typeof LEVELS)[number]);
  const make = (name: (typeof LEVELS)[number]): LogFn =>
    ((obj: unknown, msg?: string) => {
      if (min < 0 || LEVELS.indexOf(name) < min) return;
      const text = typeof obj === 'string' ? obj : (msg ?? '');
      const extra = typeof obj === 'object' && obj !== null ? ` ${JSON.stringify(obj, (_k, v: unknown) => (v instanceof Error ? v.message : v))}` : '';
      process.stderr.write(`${name}: ${text}${extra}\n`);
    }) as LogFn;
  const logger: Logger = {
    trace: make('trace'),
    debug: make('debug'),
    info: make('info'),
    warn: make('warn'),
    error: make('error'),
    fatal: make('fatal'),
    child: () => logger,
  };
  return logger;
}

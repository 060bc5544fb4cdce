import type { Logger } from '../../packages/core/dist/index.js';

/** A Logger keeping every call (level, fields and message serialized), to check what a library logs. */
export function recordingLogger(): { logger: Logger; text(): string; lines: Array<{ level: string; line: string }> } {
  const lines: Array<{ level: string; line: string }> = [];
  const fn = (level: string) => (a: unknown, b?: string) => {
    const fields = a instanceof Error ? { message: a.message, stack: a.stack } : a;
    lines.push({ level, line: `${JSON.stringify(fields, (_k, v: unknown) => (v instanceof Error ? { message: v.message, stack: v.stack } : v))} ${b ?? ''}` });
  };
  const logger: Logger = {
    trace: fn('trace'),
    debug: fn('debug'),
    info: fn('info'),
    warn: fn('warn'),
    error: fn('error'),
    fatal: fn('fatal'),
    child: () => logger,
  };
  return { logger, lines, text: () => lines.map((l) => l.line).join('\n') };
}

import type { Logger } from '../../packages/core/dist/index.js';

/** One logger call: its level, its message, and the whole call (fields and message) serialized. */
export interface LoggedLine {
  level: string;
  msg: string;
  line: string;
}

/** A Logger keeping every call, to check what a library logs (and that no secret is among it). */
export function recordingLogger(): { logger: Logger; lines: LoggedLine[]; text(): string } {
  const lines: LoggedLine[] = [];
  const serialize = (v: unknown) => JSON.stringify(v, (_k, x: unknown) => (x instanceof Error ? { message: x.message, stack: x.stack } : x));
  const fn = (level: string) => (a: unknown, b?: string) => {
    const msg = typeof a === 'string' ? a : (b ?? '');
    lines.push({ level, msg, line: `${serialize(a)} ${b ?? ''}` });
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

import avro from 'avsc';

/**
 * Avro schema compatibility, decided by real schema resolution (avsc's `createResolver`), the
 * way the Confluent registry decides it with the Java Avro library:
 *
 * - BACKWARD: the new schema, as reader, can read data written with the previous one;
 * - FORWARD: the previous schema, as reader, can read data written with the new one;
 * - FULL: both;
 * - *_TRANSITIVE: the same against every previous version, not only the latest;
 * - NONE: anything goes.
 *
 * Pure functions: no I/O, no registry state.
 */
export const COMPATIBILITY_LEVELS = ['NONE', 'BACKWARD', 'BACKWARD_TRANSITIVE', 'FORWARD', 'FORWARD_TRANSITIVE', 'FULL', 'FULL_TRANSITIVE'] as const;
export type CompatibilityLevel = (typeof COMPATIBILITY_LEVELS)[number];

export function isCompatibilityLevel(value: unknown): value is CompatibilityLevel {
  return typeof value === 'string' && (COMPATIBILITY_LEVELS as readonly string[]).includes(value);
}

/** A schema text that is not valid Avro (the registry answers 42201). */
export class InvalidSchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidSchemaError';
  }
}

/** Parses an Avro schema given as JSON text; throws InvalidSchemaError with avsc's reason. */
export function parseAvro(schema: string): avro.Type {
  let json: unknown;
  try {
    json = JSON.parse(schema);
  } catch (err) {
    throw new InvalidSchemaError(`Invalid schema: not JSON (${(err as Error).message})`);
  }
  try {
    return avro.Type.forSchema(json as avro.Schema);
  } catch (err) {
    throw new InvalidSchemaError(`Invalid schema: ${(err as Error).message}`);
  }
}

/**
 * The form a schema is stored and compared in: valid Avro, re-serialised without insignificant
 * whitespace. Every attribute (docs, custom properties, logical types) is kept as written, so
 * clients get back exactly what they registered; two registrations that differ only in
 * formatting are the same schema and share one id.
 */
export function canonicalSchema(schema: string): string {
  parseAvro(schema);
  return JSON.stringify(JSON.parse(schema));
}

export interface PreviousSchema {
  readonly version: number;
  readonly schema: string;
}

export interface CompatibilityResult {
  readonly compatible: boolean;
  /** One line per failed check, naming the version and avsc's reason. */
  readonly messages: string[];
}

/** Can `reader` read data written with `writer`? Returns avsc's reason when it cannot. */
function resolveError(reader: avro.Type, writer: avro.Type): string | null {
  try {
    reader.createResolver(writer);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * Checks `candidate` against `previous` (ordered oldest first) under `level`. Non-transitive
 * levels look only at the last entry of `previous`. Throws InvalidSchemaError when the candidate
 * is not valid Avro (previous schemas were validated when they were registered).
 */
export function checkCompatibility(candidate: string, previous: readonly PreviousSchema[], level: CompatibilityLevel): CompatibilityResult {
  const next = parseAvro(candidate);
  if (level === 'NONE' || previous.length === 0) return { compatible: true, messages: [] };
  const against = level.endsWith('_TRANSITIVE') ? previous : previous.slice(-1);
  const backward = level.startsWith('BACKWARD') || level.startsWith('FULL');
  const forward = level.startsWith('FORWARD') || level.startsWith('FULL');
  const messages: string[] = [];
  // Newest first, as Confluent reports them.
  for (const prev of [...against].reverse()) {
    const old = parseAvro(prev.schema);
    if (backward) {
      const why = resolveError(next, old);
      if (why !== null) messages.push(`${level}: the new schema cannot read data written with version ${prev.version}: ${why}`);
    }
    if (forward) {
      const why = resolveError(old, next);
      if (why !== null) messages.push(`${level}: version ${prev.version} cannot read data written with the new schema: ${why}`);
    }
  }
  return { compatible: messages.length === 0, messages };
}

import type { Logger } from '@reach/core';
import {
  canonicalSchema,
  checkCompatibility,
  InvalidSchemaError,
  isCompatibilityLevel,
  type CompatibilityLevel,
  type CompatibilityResult,
} from './compatibility.js';
import { configRecord, RegistryState, schemaRecord, type LogRecord, type SchemaEntry } from './state.js';

/** Where writes go: SchemaLogWriter in production, a fake in unit tests. */
export interface LogAppender {
  /** Resolves once the records are durably stored (acks=-1). */
  append(records: readonly LogRecord[]): Promise<void>;
}

/** A Confluent-style error: HTTP status plus `error_code`. */
export class RegistryError extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: number,
    message: string,
  ) {
    super(message);
    this.name = 'RegistryError';
  }
}

const subjectNotFound = (subject: string) => new RegistryError(404, 40401, `Subject '${subject}' not found.`);
const versionNotFound = (version: number | string) => new RegistryError(404, 40402, `Version ${version} not found.`);
const schemaNotFound = (what = 'Schema not found') => new RegistryError(404, 40403, what);
const subjectSoftDeleted = (subject: string) => new RegistryError(404, 40404, `Subject '${subject}' was soft deleted.Set permanent=true to delete permanently`);
const noSubjectConfig = (subject: string) => new RegistryError(404, 40408, `Subject '${subject}' does not have subject-level compatibility configured`);
const invalidSchema = (message: string) => new RegistryError(422, 42201, message);
const invalidLevel = () =>
  new RegistryError(
    422,
    42203,
    'Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive',
  );
const storeError = (err: unknown) =>
  new RegistryError(500, 50001, `Error while writing to the schema store: ${err instanceof Error ? err.message : String(err)}`);

/** `latest`, `-1` or 1..2^31-1, else 42202. */
export function parseVersion(raw: string): number | 'latest' {
  if (raw === 'latest' || raw === '-1') return 'latest';
  if (/^\d+$/.test(raw)) {
    const n = Number(raw);
    if (n >= 1 && n <= 2 ** 31 - 1) return n;
  }
  throw new RegistryError(
    422,
    42202,
    `The specified version '${raw}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string "latest"`,
  );
}

/** The request body of register / lookup / compatibility. */
export interface SchemaRequest {
  schema?: unknown;
  schemaType?: unknown;
  references?: unknown;
}

/** Validates a request body and returns the schema's canonical text. AVRO only, no references. */
function schemaOf(body: SchemaRequest): string {
  if (body.schemaType !== undefined && body.schemaType !== null && body.schemaType !== 'AVRO') {
    throw invalidSchema(`Invalid schema: schema type ${JSON.stringify(body.schemaType)} is not supported, only AVRO`);
  }
  if (Array.isArray(body.references) && body.references.length > 0) throw invalidSchema('Invalid schema: schema references are not supported');
  if (typeof body.schema !== 'string' || body.schema.trim() === '') throw invalidSchema('Empty schema');
  try {
    return canonicalSchema(body.schema);
  } catch (err) {
    if (err instanceof InvalidSchemaError) throw invalidSchema(err.message);
    throw err;
  }
}

/** What the GET version / lookup routes answer (schemaType is omitted for AVRO, as Confluent does). */
export function describe(e: SchemaEntry): { subject: string; version: number; id: number; schema: string } {
  return { subject: e.subject, version: e.version, id: e.id, schema: e.schema };
}

/**
 * The registry's operations over the in-memory state. Reads answer from memory; every write is
 * produced to the log first and applied to memory only once the broker acknowledged it, so
 * memory never holds what a restart would not find again.
 *
 * Single writer: writes are serialised through one promise chain in this process, and nothing
 * coordinates two registry processes on the same topic (they would hand out the same ids). The
 * development stack runs exactly one.
 */
export class Registry {
  private writes: Promise<unknown> = Promise.resolve();

  constructor(
    readonly state: RegistryState,
    private readonly writer: LogAppender,
    private readonly logger: Logger,
  ) {}

  /** Runs `fn` after every earlier write finished: checks and id allocation see settled state. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.writes.then(fn, fn);
    this.writes = run.catch(() => undefined);
    return run;
  }

  private async append(records: readonly LogRecord[]): Promise<void> {
    try {
      await this.writer.append(records);
    } catch (err) {
      this.logger.error({ err }, 'write to the schema store failed');
      throw storeError(err);
    }
  }

  /** POST /subjects/{subject}/versions */
  register(subject: string, body: SchemaRequest): Promise<{ id: number }> {
    const schema = schemaOf(body);
    return this.exclusive(async () => {
      const live = this.state.liveVersions(subject);
      const existing = live.find((e) => e.schema === schema);
      if (existing) return { id: existing.id };
      const level = this.state.effectiveLevel(subject);
      const result = checkCompatibility(schema, live, level);
      if (!result.compatible) {
        throw new RegistryError(
          409,
          409,
          `Schema being registered is incompatible with an earlier schema for subject "${subject}", details: ${JSON.stringify(result.messages)}`,
        );
      }
      const knownId = this.state.idOf(schema);
      const entry: SchemaEntry = { subject, version: this.state.nextVersion(subject), id: knownId ?? this.state.nextId(), schema, deleted: false };
      try {
        await this.append([schemaRecord(entry)]);
      } catch (err) {
        // The write may still have reached the log: never hand this id out again.
        this.state.burnId(entry.id);
        throw err;
      }
      this.state.apply(schemaRecord(entry));
      this.logger.info({ subject, version: entry.version, id: entry.id, level }, 'schema registered');
      return { id: entry.id };
    });
  }

  /** POST /subjects/{subject} */
  lookup(subject: string, body: SchemaRequest): ReturnType<typeof describe> {
    const schema = schemaOf(body);
    const live = this.state.liveVersions(subject);
    if (live.length === 0) throw subjectNotFound(subject);
    const found = live.find((e) => e.schema === schema);
    if (!found) throw schemaNotFound();
    return describe(found);
  }

  /** A live version of a subject; 40401 / 40402 when missing. */
  version(subject: string, rawVersion: string): SchemaEntry {
    const version = parseVersion(rawVersion);
    const live = this.state.liveVersions(subject);
    if (live.length === 0) throw subjectNotFound(subject);
    const found = version === 'latest' ? live[live.length - 1] : live.find((e) => e.version === version);
    if (!found) throw versionNotFound(version);
    return found;
  }

  versions(subject: string): number[] {
    const live = this.state.liveVersions(subject);
    if (live.length === 0) throw subjectNotFound(subject);
    return live.map((e) => e.version);
  }

  schemaById(rawId: string): string {
    const id = /^\d+$/.test(rawId) ? Number(rawId) : NaN;
    const schema = this.state.schema(id);
    if (schema === undefined) throw schemaNotFound(`Schema ${rawId} not found`);
    return schema;
  }

  /** Live (subject, version) pairs using schema `rawId`; 40403 when the id is unknown. */
  usages(rawId: string): Array<{ subject: string; version: number }> {
    this.schemaById(rawId);
    return this.state.usages(Number(rawId));
  }

  /** Resolves once every write queued so far has finished. */
  async drain(): Promise<void> {
    await this.writes;
  }

  /**
   * POST /compatibility/subjects/{subject}/versions[/{version}]: with a version, against that one
   * version (Confluent's behaviour); without, against every live version (transitive levels
   * then see all of them). Uses the subject's effective level.
   */
  testCompatibility(subject: string, rawVersion: string | undefined, body: SchemaRequest): CompatibilityResult {
    const schema = schemaOf(body);
    const against = rawVersion === undefined ? this.state.liveVersions(subject) : [this.version(subject, rawVersion)];
    return checkCompatibility(schema, against, this.state.effectiveLevel(subject));
  }

  /** GET /config[/{subject}]; `defaultToGlobal` answers the effective level of an unconfigured subject. */
  getConfig(subject: string | null, defaultToGlobal = false): CompatibilityLevel {
    if (subject === null) return this.state.config(null) ?? 'BACKWARD';
    const own = this.state.config(subject);
    if (own) return own;
    if (defaultToGlobal) return this.state.effectiveLevel(subject);
    throw noSubjectConfig(subject);
  }

  /** PUT /config[/{subject}] with `{compatibility}`; levels are accepted in any case. */
  setConfig(subject: string | null, body: { compatibility?: unknown }): Promise<CompatibilityLevel> {
    const level = typeof body.compatibility === 'string' ? body.compatibility.toUpperCase() : undefined;
    if (!isCompatibilityLevel(level)) throw invalidLevel();
    return this.exclusive(async () => {
      const record = configRecord(subject, level);
      await this.append([record]);
      this.state.apply(record);
      this.logger.info({ subject, level }, 'compatibility level set');
      return level;
    });
  }

  /** DELETE /config/{subject}: back to the global level; returns the level it had. */
  deleteConfig(subject: string): Promise<CompatibilityLevel> {
    return this.exclusive(async () => {
      const previous = this.getConfig(subject);
      const record = configRecord(subject, null);
      await this.append([record]);
      this.state.apply(record);
      return previous;
    });
  }

  /**
   * DELETE /subjects/{subject}: soft delete. Each live version's record is rewritten with
   * `deleted: true` (ids stay resolvable for old data); a later registration continues the
   * version numbers. Permanent deletion is not offered: it would let ids be reused after the
   * topic is compacted.
   */
  deleteSubject(subject: string): Promise<number[]> {
    return this.exclusive(async () => {
      const live = this.state.liveVersions(subject);
      if (live.length === 0) throw this.state.isSoftDeleted(subject) ? subjectSoftDeleted(subject) : subjectNotFound(subject);
      const records = live.map((e) => schemaRecord({ ...e, deleted: true }));
      await this.append(records);
      for (const r of records) this.state.apply(r);
      this.logger.info({ subject, versions: live.map((e) => e.version) }, 'subject soft-deleted');
      return live.map((e) => e.version);
    });
  }
}

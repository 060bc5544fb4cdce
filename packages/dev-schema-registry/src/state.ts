import type { CompatibilityLevel } from './compatibility.js';
import { isCompatibilityLevel } from './compatibility.js';

/**
 * The registry's state: what the `_schemas` topic says, folded into maps. Records are JSON in
 * the spirit of Confluent's own store, so the log can be read with any console consumer:
 *
 *   key {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
 *   value {"subject":S,"version":V,"id":N,"schema":"...","deleted":false}
 *
 *   key {"keytype":"CONFIG","subject":S|null,"magic":0}     (null subject = the global level)
 *   value {"compatibilityLevel":"BACKWARD"}                  (null value = subject level cleared)
 *
 * The topic is compacted: the latest record per key is the truth, so a soft delete rewrites
 * each version's record with `deleted: true`. Other key types (NOOP, MODE, DELETE_SUBJECT, …
 * written by a real Confluent registry) are ignored.
 */
export interface SchemaEntry {
  readonly subject: string;
  readonly version: number;
  readonly id: number;
  /** Canonical text (see canonicalSchema). */
  readonly schema: string;
  readonly deleted: boolean;
}

export interface LogRecord {
  readonly key: string;
  readonly value: string | null;
}

// Field order is fixed here: compaction compares key bytes, so one logical key must always
// serialise the same way.
export function schemaRecord(e: SchemaEntry): LogRecord {
  return {
    key: JSON.stringify({ keytype: 'SCHEMA', subject: e.subject, version: e.version, magic: 1 }),
    value: JSON.stringify({ subject: e.subject, version: e.version, id: e.id, schema: e.schema, deleted: e.deleted }),
  };
}

export function configRecord(subject: string | null, level: CompatibilityLevel | null): LogRecord {
  return {
    key: JSON.stringify({ keytype: 'CONFIG', subject, magic: 0 }),
    value: level === null ? null : JSON.stringify({ compatibilityLevel: level }),
  };
}

export class RegistryState {
  /** subject → version → entry, soft-deleted versions included. */
  private readonly subjects = new Map<string, Map<number, SchemaEntry>>();
  private readonly schemaById = new Map<number, string>();
  private readonly idBySchema = new Map<string, number>();
  /** Compatibility levels; the `null` key is the global one. */
  private readonly configs = new Map<string | null, CompatibilityLevel>();
  private maxId = 0;

  /** Folds one record of the log. Returns false when the record is not one this registry knows. */
  apply(record: LogRecord): boolean {
    try {
      return this.fold(record);
    } catch {
      return false; // not JSON: someone else's record
    }
  }

  private fold(record: LogRecord): boolean {
    const key = JSON.parse(record.key) as { keytype?: unknown; subject?: unknown; version?: unknown };
    if (key.keytype === 'SCHEMA' && typeof key.subject === 'string' && typeof key.version === 'number') {
      if (record.value === null) {
        this.subjects.get(key.subject)?.delete(key.version);
        return true;
      }
      const v = JSON.parse(record.value) as Partial<SchemaEntry>;
      if (typeof v.id !== 'number' || typeof v.schema !== 'string') return false;
      const entry: SchemaEntry = { subject: key.subject, version: key.version, id: v.id, schema: v.schema, deleted: v.deleted === true };
      let versions = this.subjects.get(entry.subject);
      if (!versions) this.subjects.set(entry.subject, (versions = new Map()));
      versions.set(entry.version, entry);
      this.schemaById.set(entry.id, entry.schema);
      if (!this.idBySchema.has(entry.schema)) this.idBySchema.set(entry.schema, entry.id);
      this.burnId(entry.id);
      return true;
    }
    if (key.keytype === 'CONFIG' && (typeof key.subject === 'string' || key.subject === null || key.subject === undefined)) {
      const subject = typeof key.subject === 'string' ? key.subject : null;
      if (record.value === null) {
        this.configs.delete(subject);
        return true;
      }
      const level = (JSON.parse(record.value) as { compatibilityLevel?: unknown }).compatibilityLevel;
      if (!isCompatibilityLevel(level)) return false;
      this.configs.set(subject, level);
      return true;
    }
    return false;
  }

  /** The id the next new schema gets: ids are global, sequential from 1, never reused. */
  nextId(): number {
    return this.maxId + 1;
  }

  /** Marks `id` as taken (also when a write of it may or may not have reached the log). */
  burnId(id: number): void {
    if (id > this.maxId) this.maxId = id;
  }

  subjectNames(includeDeleted = false): string[] {
    return [...this.subjects]
      .filter(([, versions]) => [...versions.values()].some((e) => includeDeleted || !e.deleted))
      .map(([name]) => name)
      .sort();
  }

  /** Live (not soft-deleted) versions of a subject, oldest first. */
  liveVersions(subject: string): SchemaEntry[] {
    return [...(this.subjects.get(subject)?.values() ?? [])].filter((e) => !e.deleted).sort((a, b) => a.version - b.version);
  }

  /** The version number a new registration under `subject` gets (soft-deleted ones count). */
  nextVersion(subject: string): number {
    return Math.max(0, ...(this.subjects.get(subject)?.keys() ?? [])) + 1;
  }

  /** Does the subject have versions, all of them soft-deleted? */
  isSoftDeleted(subject: string): boolean {
    const versions = this.subjects.get(subject);
    return versions !== undefined && versions.size > 0 && this.liveVersions(subject).length === 0;
  }

  schema(id: number): string | undefined {
    return this.schemaById.get(id);
  }

  idOf(canonical: string): number | undefined {
    return this.idBySchema.get(canonical);
  }

  /** Live (subject, version) pairs that use schema `id`. */
  usages(id: number): Array<{ subject: string; version: number }> {
    const out: Array<{ subject: string; version: number }> = [];
    for (const name of this.subjectNames()) {
      for (const e of this.liveVersions(name)) if (e.id === id) out.push({ subject: e.subject, version: e.version });
    }
    return out;
  }

  config(subject: string | null): CompatibilityLevel | undefined {
    return this.configs.get(subject);
  }

  /** The level that applies to `subject`: its own, else the global one, else BACKWARD. */
  effectiveLevel(subject: string): CompatibilityLevel {
    return this.configs.get(subject) ?? this.configs.get(null) ?? 'BACKWARD';
  }
}

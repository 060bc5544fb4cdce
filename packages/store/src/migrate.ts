import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Pool, PoolClient } from 'pg';
import { ReachError, type Logger } from '@reach/core';

/**
 * Versioned SQL migrations. Every service runs `migrate()` at start (docs/design.md §7: "migrations run
 * on start"), so the runner must be safe when seven processes call it at the same moment, and
 * must refuse to run against a history it does not recognise.
 */

/**
 * `packages/store/migrations/`. The compiled module lives in `dist/` (and the source in `src/`
 * when tests import it directly); both are one level below the package root.
 */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations/', import.meta.url));

/** `NNN_description.sql`: the number orders and identifies a migration, forever. */
const FILE_PATTERN = /^(\d{3,})_([a-z0-9_]+)\.sql$/;

/**
 * Every runner takes this session-level advisory lock before reading the history, and keeps it
 * until it has applied everything: the second process waits, then finds nothing left to do.
 * Advisory locks are per database, so separate databases never wait on each other.
 * The number is arbitrary but fixed: 0x7265616368000001, "reach" in ASCII then 1 (a string,
 * because it does not fit a JS number exactly).
 */
export const MIGRATION_LOCK_KEY = '8243101772546048001';

export interface Migration {
  version: number;
  /** The file name without `.sql`, e.g. `001_message_read_model`. */
  name: string;
  sql: string;
  checksum: string;
}

export interface MigrateOptions {
  /** Where the `.sql` files are; defaults to the package's own migrations. */
  dir?: string;
}

/**
 * sha256 of the file with line endings normalised, so a checkout that converts to CRLF does not
 * look like an edited migration.
 */
export function migrationChecksum(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n'), 'utf8').digest('hex');
}

/** Reads and orders the migration files; a misnamed `.sql` file or a reused number is an error. */
export async function loadMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql'));
  const migrations: Migration[] = [];
  const seen = new Map<number, string>();
  for (const file of files) {
    const m = FILE_PATTERN.exec(file);
    if (!m) {
      // Silently skipping a misnamed file would silently skip a schema change.
      throw new Error(`migration file ${file} in ${dir} does not match NNN_description.sql`);
    }
    const version = Number(m[1]);
    const name = file.slice(0, -'.sql'.length);
    const clash = seen.get(version);
    if (clash) throw new Error(`migrations ${clash} and ${name} share version ${version}`);
    seen.set(version, name);
    const sql = await readFile(join(dir, file), 'utf8');
    migrations.push({ version, name, sql, checksum: migrationChecksum(sql) });
  }
  return migrations.sort((a, b) => a.version - b.version);
}

interface AppliedRow {
  version: number;
  name: string;
  checksum: string;
}

/**
 * Applies every pending migration in version order, each in its own transaction together with
 * its row in `reach_schema_migrations`, so a failure leaves the database at the last good
 * version. Returns the names it applied (empty when the schema was current).
 *
 * Migrations must therefore be transaction-safe (no `CREATE INDEX CONCURRENTLY`, no
 * `ALTER TYPE … ADD VALUE` used in the same file).
 */
export async function migrate(pool: Pool, logger: Logger, opts: MigrateOptions = {}): Promise<string[]> {
  const log = logger.child({ component: 'migrate' });
  const migrations = await loadMigrations(opts.dir);
  const client = await pool.connect();
  let broken = false;
  try {
    // A pool may carry a statement_timeout; waiting for another process's migrations, or a
    // long migration itself, must not be cancelled by it. RESET below restores the pool's value.
    await client.query('SET statement_timeout = 0');
    // Session lock, not per-transaction: the read of the history, the checks and every apply
    // must happen as one critical section across processes.
    await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(`
        CREATE TABLE IF NOT EXISTS reach_schema_migrations (
          version    integer     PRIMARY KEY,
          name       text        NOT NULL,
          checksum   text        NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
      const applied = await readApplied(client);
      verifyHistory(migrations, applied, log);

      const done: string[] = [];
      for (const m of migrations) {
        if (applied.has(m.version)) continue;
        const started = Date.now();
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO reach_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [m.version, m.name, m.checksum]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {
            broken = true;
          });
          throw new ReachError('INTERNAL', `migration ${m.name} failed: ${(err as Error).message}`, {
            cause: err,
            retryable: false,
            details: { migration: m.name },
          });
        }
        log.info({ migration: m.name, ms: Date.now() - started }, 'applied migration');
        done.push(m.name);
      }
      if (done.length === 0) log.debug({ migrations: migrations.length }, 'schema is current');
      return done;
    } finally {
      try {
        await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
        await client.query('RESET statement_timeout');
      } catch {
        // The connection is dead, and PostgreSQL released the lock with the session; make
        // sure the pool does not hand this client out again.
        broken = true;
      }
    }
  } finally {
    client.release(broken);
  }
}

async function readApplied(client: PoolClient): Promise<Map<number, AppliedRow>> {
  const res = await client.query<AppliedRow>('SELECT version, name, checksum FROM reach_schema_migrations ORDER BY version');
  return new Map(res.rows.map((r) => [r.version, r]));
}

/**
 * An applied migration whose file has changed means this database and this code disagree
 * about the schema; carrying on would hide that until a query breaks. Refuse to start.
 * A version the code does not know (a newer release ran first, e.g. in a rolling deploy) is
 * only logged: older code keeps working against an additive newer schema.
 */
function verifyHistory(migrations: Migration[], applied: Map<number, AppliedRow>, log: Logger): void {
  const known = new Set(migrations.map((m) => m.version));
  for (const m of migrations) {
    const row = applied.get(m.version);
    if (!row) continue;
    if (row.checksum !== m.checksum || row.name !== m.name) {
      throw new ReachError(
        'INTERNAL',
        `migration ${m.name} was applied as ${row.name} with checksum ${row.checksum}, but the file ` +
          `now has checksum ${m.checksum}: applied migrations must never be edited; add a new one`,
        {
          retryable: false,
          details: { migration: m.name, appliedChecksum: row.checksum, fileChecksum: m.checksum },
        },
      );
    }
  }
  for (const row of applied.values()) {
    if (!known.has(row.version)) {
      log.warn({ migration: row.name }, 'database has a migration this build does not know (newer release?)');
    }
  }
}

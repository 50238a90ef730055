import type pg from 'pg'
import { defineSchema, type MigrationReport } from './migrations.js'

/**
 * The session tables. Invariants the code relies on:
 *
 * - `sid` names one lifecycle of one id and is never reused (an identity
 *   column), so the revision `<sid>.<next_seq>` never repeats, not even after
 *   a delete and re-create under the same id.
 * - A batch row never changes once committed; `next_seq` only grows, and it
 *   always equals the end of the last batch (both move in one statement).
 * - Ids are stored as their UTF-8 bytes (`bytea` compares bytes, which is
 *   code point order) and looked up by their SHA-256 (`id_key`), so an id of
 *   any length or content (NUL included) is one indexable key.
 * - A fork by reference stores only its own events (`first_seq >= inherited`)
 *   and names its source (`fork_sid`, restricted: the source cannot be
 *   deleted while referenced) and the checksum of the source's batch that
 *   holds the cut's last event.
 * - Every change is stamped with its transaction id (`xid8`): an append's
 *   batch row carries it (schema 2: the append writes no other row), and
 *   materializations, deletes and fork materializations add a
 *   `dsh_changes` row. Readers take their snapshot's xmin as the cursor.
 * - `dsh_changes` is pruned behind `dsh_feed.horizon` (schema 3,
 *   `feed-pruning.ts`): a cursor below it asks for a rescan.
 */
export const SESSIONS_SCHEMA = defineSchema('sessions', [
  {
    version: 1,
    description: 'sessions, batches, change feed',
    statements: [
      `CREATE TABLE dsh_sessions (
        sid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id_key bytea NOT NULL UNIQUE,
        id bytea NOT NULL,
        header text NOT NULL,
        created_at bigint NOT NULL,
        parent_key bytea,
        origin text,
        cwd_key bytea,
        inherited integer NOT NULL CHECK (inherited >= 0),
        fork_sid bigint REFERENCES dsh_sessions (sid) ON DELETE RESTRICT,
        fork_checksum integer,
        next_seq integer NOT NULL DEFAULT 0 CHECK (next_seq >= 0)
      )`,
      'CREATE INDEX dsh_sessions_created ON dsh_sessions (created_at)',
      'CREATE INDEX dsh_sessions_parent ON dsh_sessions (parent_key, created_at) WHERE parent_key IS NOT NULL',
      'CREATE INDEX dsh_sessions_cwd ON dsh_sessions (cwd_key, created_at) WHERE cwd_key IS NOT NULL',
      'CREATE INDEX dsh_sessions_origin ON dsh_sessions (origin, created_at) WHERE origin IS NOT NULL',
      'CREATE INDEX dsh_sessions_fork ON dsh_sessions (fork_sid) WHERE fork_sid IS NOT NULL',
      `CREATE TABLE dsh_batches (
        sid bigint NOT NULL REFERENCES dsh_sessions (sid) ON DELETE CASCADE,
        first_seq integer NOT NULL CHECK (first_seq >= 0),
        count integer NOT NULL CHECK (count > 0),
        plain_length integer NOT NULL,
        checksum integer NOT NULL,
        body bytea NOT NULL,
        PRIMARY KEY (sid, first_seq)
      )`,
      // Bodies are zstd frames already: no second (pglz) compression attempt.
      'ALTER TABLE dsh_batches ALTER COLUMN body SET STORAGE EXTERNAL',
      `CREATE TABLE dsh_changes (
        position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
        id bytea NOT NULL
      )`,
      'CREATE INDEX dsh_changes_xid ON dsh_changes (xid)',
      `CREATE TABLE dsh_feed (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        feed_id text NOT NULL
      )`,
      'INSERT INTO dsh_feed (feed_id) VALUES (gen_random_uuid()::text)',
    ],
  },
  {
    version: 2,
    description: 'appends are their own change records: batches stamped with their transaction id',
    statements: [
      'ALTER TABLE dsh_batches ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id()',
      'CREATE INDEX dsh_batches_xid ON dsh_batches (xid)',
    ],
  },
  {
    version: 3,
    description: 'the change feed is pruned behind a horizon: dsh_feed keeps the horizon, the base and the position the base was taken at',
    statements: [
      `ALTER TABLE dsh_feed
         ADD COLUMN horizon xid8 NOT NULL DEFAULT '0'::xid8,
         ADD COLUMN base xid8 NOT NULL DEFAULT '0'::xid8,
         ADD COLUMN base_position bigint NOT NULL DEFAULT 0`,
    ],
  },
])

/** The component name of the session tables in `dsh_schema_version`. */
export const SESSIONS_COMPONENT = SESSIONS_SCHEMA.component
export const SESSION_MIGRATIONS = SESSIONS_SCHEMA.migrations

/** Creates or upgrades the session tables (idempotent; safe from several hosts at once). */
export function migrate(pool: pg.Pool): Promise<MigrationReport> {
  return SESSIONS_SCHEMA.migrate(pool)
}

/** The NOTIFY channel every committed change is announced on. */
export const CHANGES_CHANNEL = 'dsh_changes'

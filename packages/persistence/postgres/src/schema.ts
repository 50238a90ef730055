import type pg from 'pg'
import { attachmentsTable } from './attachments.js'
import { type Layout, partitionsOf } from './layout.js'
import { defineSchema, type MigrateOptions, type MigrationReport } from './migrations.js'

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
 * - Every per-session table is hash-partitioned on `id_key` (schema 4,
 *   `layout.ts`), and every unique and foreign key includes it: a session's
 *   rows are addressed as `(id_key, sid)`. `sid` stays unique (one identity
 *   sequence) but is no key on its own.
 * - A batch row has no foreign key to its session row: a foreign key's check
 *   is a second statement inside every append, and it locks the session row
 *   the append's own `UPDATE … next_seq` has just locked and proved present
 *   (`append-statement.ts`). Every statement that inserts a batch takes it
 *   from the session row it writes in the same statement (the append's
 *   `UPDATE`, the first append's `INSERT`, a dependant's materialization),
 *   so a batch exists only beside its session row; a delete locks the
 *   session row, then removes its batches and the row in one statement
 *   (`deletion.ts`), and `sid` is never reused, so no batch outlives its
 *   session into another lifecycle (schema 6).
 * - A fork's source is in another session's partition, so `fork_key` /
 *   `fork_sid` is no foreign key: a fork's insert locks the source row
 *   (`FOR KEY SHARE`) and a delete locks the row it deletes and refuses while
 *   a fork names it (`deletion.ts`).
 */
const FEED_TABLE = `CREATE TABLE dsh_feed (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  feed_id text NOT NULL
)`
const FEED_ROW = 'INSERT INTO dsh_feed (feed_id) VALUES (gen_random_uuid()::text)'
const FEED_HORIZON = `ALTER TABLE dsh_feed
  ADD COLUMN horizon xid8 NOT NULL DEFAULT '0'::xid8,
  ADD COLUMN base xid8 NOT NULL DEFAULT '0'::xid8,
  ADD COLUMN base_position bigint NOT NULL DEFAULT 0`

/** The per-session tables of schema 4 (`dsh_feed`, the change feed's bookkeeping row, is not per session). */
function sessionTables(layout: Layout): string[] {
  return [...sessionsTable(layout), ...batchesTable(layout), ...changesTable(layout)]
}

function sessionsTable(layout: Layout): string[] {
  return [
    `CREATE TABLE dsh_sessions (
        id_key bytea NOT NULL,
        sid bigint GENERATED ALWAYS AS IDENTITY,
        id bytea NOT NULL,
        header text NOT NULL,
        created_at bigint NOT NULL,
        parent_key bytea,
        origin text,
        cwd_key bytea,
        inherited integer NOT NULL CHECK (inherited >= 0),
        fork_key bytea,
        fork_sid bigint,
        fork_checksum integer,
        next_seq integer NOT NULL DEFAULT 0 CHECK (next_seq >= 0),
        PRIMARY KEY (id_key),
        UNIQUE (id_key, sid),
        CHECK ((fork_key IS NULL) = (fork_sid IS NULL))
      ) PARTITION BY HASH (id_key)`,
    ...partitionsOf('dsh_sessions', layout),
    'CREATE INDEX dsh_sessions_created ON dsh_sessions (created_at)',
    'CREATE INDEX dsh_sessions_parent ON dsh_sessions (parent_key, created_at) WHERE parent_key IS NOT NULL',
    'CREATE INDEX dsh_sessions_cwd ON dsh_sessions (cwd_key, created_at) WHERE cwd_key IS NOT NULL',
    'CREATE INDEX dsh_sessions_origin ON dsh_sessions (origin, created_at) WHERE origin IS NOT NULL',
    'CREATE INDEX dsh_sessions_fork ON dsh_sessions (fork_sid) WHERE fork_sid IS NOT NULL',
  ]
}

function batchesTable(layout: Layout): string[] {
  return [
    `CREATE TABLE dsh_batches (
        id_key bytea NOT NULL,
        sid bigint NOT NULL,
        first_seq integer NOT NULL CHECK (first_seq >= 0),
        count integer NOT NULL CHECK (count > 0),
        plain_length integer NOT NULL,
        checksum integer NOT NULL,
        body bytea NOT NULL,
        xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
        PRIMARY KEY (id_key, sid, first_seq)
      ) PARTITION BY HASH (id_key)`,
    ...partitionsOf('dsh_batches', layout),
    // Bodies are zstd frames already: no second (pglz) compression attempt (recurses into the partitions).
    'ALTER TABLE dsh_batches ALTER COLUMN body SET STORAGE EXTERNAL',
    'CREATE INDEX dsh_batches_xid ON dsh_batches (xid)',
  ]
}

function changesTable(layout: Layout): string[] {
  return [
    `CREATE TABLE dsh_changes (
        id_key bytea NOT NULL,
        position bigint GENERATED ALWAYS AS IDENTITY,
        xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
        id bytea NOT NULL,
        PRIMARY KEY (id_key, position)
      ) PARTITION BY HASH (id_key)`,
    ...partitionsOf('dsh_changes', layout),
    'CREATE INDEX dsh_changes_xid ON dsh_changes (xid)',
    // The feed's pruning reads max(position) (`feed-pruning.ts`).
    'CREATE INDEX dsh_changes_position ON dsh_changes (position)',
  ]
}

/** The schema 3 tables are moved here, copied into the partitioned ones and dropped, in the step's one transaction. */
const OLD = 'dsh_migrating_sessions'

export const SESSIONS_SCHEMA = defineSchema(
  'sessions',
  [
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
        'ALTER TABLE dsh_batches ALTER COLUMN body SET STORAGE EXTERNAL',
        `CREATE TABLE dsh_changes (
          position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
          id bytea NOT NULL
        )`,
        'CREATE INDEX dsh_changes_xid ON dsh_changes (xid)',
        FEED_TABLE,
        FEED_ROW,
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
      description:
        'the change feed is pruned behind a horizon: dsh_feed keeps the horizon, the base and the position the base was taken at',
      statements: [
        `ALTER TABLE dsh_feed
           ADD COLUMN horizon xid8 NOT NULL DEFAULT '0'::xid8,
           ADD COLUMN base xid8 NOT NULL DEFAULT '0'::xid8,
           ADD COLUMN base_position bigint NOT NULL DEFAULT 0`,
      ],
    },
    {
      version: 4,
      description: 'the per-session tables are hash-partitioned on id_key, and every key includes it',
      // Table by table: move the old one aside, create the partitioned one, copy. All in the step's one transaction.
      statements: (layout) => [
        `CREATE SCHEMA ${OLD}`,
        `ALTER TABLE dsh_sessions SET SCHEMA ${OLD}`,
        ...sessionsTable(layout),
        `INSERT INTO dsh_sessions (id_key, sid, id, header, created_at, parent_key, origin, cwd_key, inherited, fork_key, fork_sid, fork_checksum, next_seq)
         OVERRIDING SYSTEM VALUE
         SELECT s.id_key, s.sid, s.id, s.header, s.created_at, s.parent_key, s.origin, s.cwd_key, s.inherited, f.id_key, s.fork_sid, s.fork_checksum, s.next_seq
         FROM ${OLD}.dsh_sessions s LEFT JOIN ${OLD}.dsh_sessions f ON f.sid = s.fork_sid`,
        `SELECT setval(pg_get_serial_sequence('dsh_sessions', 'sid'), coalesce((SELECT max(sid) FROM dsh_sessions), 0) + 1, false)`,
        `ALTER TABLE dsh_batches SET SCHEMA ${OLD}`,
        ...batchesTable(layout),
        `INSERT INTO dsh_batches (id_key, sid, first_seq, count, plain_length, checksum, body, xid)
         SELECT s.id_key, b.sid, b.first_seq, b.count, b.plain_length, b.checksum, b.body, b.xid
         FROM ${OLD}.dsh_batches b JOIN ${OLD}.dsh_sessions s USING (sid)`,
        `ALTER TABLE dsh_changes SET SCHEMA ${OLD}`,
        ...changesTable(layout),
        `INSERT INTO dsh_changes (id_key, position, xid, id) OVERRIDING SYSTEM VALUE
         SELECT sha256(id), position, xid, id FROM ${OLD}.dsh_changes`,
        `SELECT setval(pg_get_serial_sequence('dsh_changes', 'position'), coalesce((SELECT max(position) FROM dsh_changes), 0) + 1, false)`,
        // Drops the old tables and the foreign keys other components' tables hold on them (their own steps re-key them).
        `DROP SCHEMA ${OLD} CASCADE`,
      ],
    },
    {
      version: 5,
      description: 'attachments: one bytea row per session and digest, hash-partitioned on id_key like the session tables',
      statements: (layout) => attachmentsTable(layout),
    },
    {
      version: 6,
      description:
        'batch rows carry no foreign key to their session row: the append proves and locks the row itself; deletes remove batches explicitly',
      // A database upgraded from schema 3 runs step 4 with the newest batches table, which has no such key: IF EXISTS.
      statements: ['ALTER TABLE dsh_batches DROP CONSTRAINT IF EXISTS dsh_batches_id_key_sid_fkey'],
    },
  ],
  { baseline: (layout) => [...sessionTables(layout), ...attachmentsTable(layout), FEED_TABLE, FEED_ROW, FEED_HORIZON] },
)

/** The component name of the session tables in `dsh_schema_version`. */
export const SESSIONS_COMPONENT = SESSIONS_SCHEMA.component
export const SESSION_MIGRATIONS = SESSIONS_SCHEMA.migrations

/** Creates or upgrades the session tables (idempotent; safe from several hosts at once). */
export function migrate(pool: pg.Pool, options: MigrateOptions = {}): Promise<MigrationReport> {
  return SESSIONS_SCHEMA.migrate(pool, options)
}

/** The NOTIFY channel every committed change is announced on. */
export const CHANGES_CHANNEL = 'dsh_changes'

import {
  defineSchema,
  type Layout,
  type MigrateOptions,
  type MigrationReport,
  partitionsOf,
} from '@dsh/session-persistence-postgres/backend'
import type pg from 'pg'

/** Announces committed checkpoint writes to every host's mirror. */
export const CACHE_CHANNEL = 'dsh_projection_cache'

const STAMP_FUNCTION = `CREATE FUNCTION dsh_projection_checkpoints_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN NEW.xid := pg_current_xact_id(); RETURN NEW; END $$`

function checkpointTable(layout: Layout): string[] {
  return [
    `CREATE TABLE dsh_projection_checkpoints (
      session_key bytea NOT NULL,
      key text NOT NULL,
      session_id bytea NOT NULL,
      identity bytea NOT NULL,
      inherited integer NOT NULL,
      state_version integer NOT NULL,
      seq integer NOT NULL,
      failed boolean NOT NULL,
      state text,
      xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
      PRIMARY KEY (session_key, key)
    ) PARTITION BY HASH (session_key)`,
    ...partitionsOf('dsh_projection_checkpoints', layout),
    'CREATE INDEX dsh_projection_checkpoints_xid ON dsh_projection_checkpoints (xid)',
    // Any update (ours, an operator's) re-stamps the row, so every mirror sees it.
    `CREATE TRIGGER dsh_projection_checkpoints_stamp BEFORE UPDATE ON dsh_projection_checkpoints
     FOR EACH ROW EXECUTE FUNCTION dsh_projection_checkpoints_stamp()`,
  ]
}

/**
 * Where forgetting deleted sessions is complete up to: the change-feed
 * cursor of the last forgetting pass that finished (one row; any writer's
 * pass may store it, an older one only makes the next pass look at more
 * sessions). Not per-session, so not partitioned.
 */
const FEED_TABLE = `CREATE TABLE dsh_projection_cache_feed (
      one boolean PRIMARY KEY DEFAULT true CHECK (one),
      cursor text NOT NULL
    )`

/** The version 1 table is moved here, copied into the partitioned one and dropped, in the step's one transaction. */
const OLD = 'dsh_migrating_cache'

/**
 * One row per (session, unit key). The lifecycle identity (the header witness
 * fields, `checkpointIdentity`) and the exact cut sit beside each row; a
 * lookup hits only when both match and the unit's `stateVersion` does. Rows
 * are derived data, keyed by the id's SHA-256 and not tied to the session
 * tables, so a cache row can never block or survive into a write of the log.
 * `xid` (the writing transaction) lets mirrors follow the table exactly.
 * The table is hash-partitioned on `session_key` (the same value as the
 * session tables' `id_key`) with their partition count: co-located with the
 * session's rows. The rows of a session persistence does not hold are
 * deleted by a writer's forgetting pass, which keeps its change-feed cursor
 * in `dsh_projection_cache_feed`.
 */
export const CACHE_SCHEMA = defineSchema(
  'projection-cache',
  [
    {
      version: 1,
      description: 'checkpoint rows',
      statements: [
        `CREATE TABLE dsh_projection_checkpoints (
          session_key bytea NOT NULL,
          key text NOT NULL,
          session_id bytea NOT NULL,
          identity bytea NOT NULL,
          inherited integer NOT NULL,
          state_version integer NOT NULL,
          seq integer NOT NULL,
          failed boolean NOT NULL,
          state text,
          xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
          PRIMARY KEY (session_key, key)
        )`,
        'CREATE INDEX dsh_projection_checkpoints_xid ON dsh_projection_checkpoints (xid)',
        STAMP_FUNCTION,
        `CREATE TRIGGER dsh_projection_checkpoints_stamp BEFORE UPDATE ON dsh_projection_checkpoints
         FOR EACH ROW EXECUTE FUNCTION dsh_projection_checkpoints_stamp()`,
      ],
    },
    {
      version: 2,
      description: 'checkpoint rows hash-partitioned on session_key beside the session tables',
      statements: (layout) => [
        `CREATE SCHEMA ${OLD}`,
        `ALTER TABLE dsh_projection_checkpoints SET SCHEMA ${OLD}`,
        ...checkpointTable(layout),
        `INSERT INTO dsh_projection_checkpoints (session_key, key, session_id, identity, inherited, state_version, seq, failed, state, xid)
         SELECT session_key, key, session_id, identity, inherited, state_version, seq, failed, state, xid FROM ${OLD}.dsh_projection_checkpoints`,
        `DROP SCHEMA ${OLD} CASCADE`,
      ],
    },
    {
      version: 3,
      description: 'the change-feed cursor up to which the rows of deleted sessions are forgotten',
      statements: [FEED_TABLE],
    },
  ],
  { baseline: (layout) => [STAMP_FUNCTION, ...checkpointTable(layout), FEED_TABLE] },
)

/** The component name of the checkpoint table in `dsh_schema_version`. */
export const CACHE_COMPONENT = CACHE_SCHEMA.component
export const CACHE_MIGRATIONS = CACHE_SCHEMA.migrations

/** Creates or upgrades the checkpoint table. */
export function migrateCache(pool: pg.Pool, options: MigrateOptions = {}): Promise<MigrationReport> {
  return CACHE_SCHEMA.migrate(pool, options)
}

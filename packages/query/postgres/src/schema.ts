import {
  defineSchema,
  type Layout,
  type MigrateOptions,
  type MigrationReport,
  partitionsOf,
} from '@dsh/session-persistence-postgres/backend'
import type pg from 'pg'

/**
 * Full-text search over the session tables of `@dsh/session-persistence-postgres`
 * (listing needs no table of its own: it reads `dsh_sessions` through its indexes).
 * One row per event with text; rows and progress go with their session lifecycle
 * (`ON DELETE CASCADE` on `sid`), so a deleted or re-created session never
 * answers with old text. Both tables are hash-partitioned on the session's
 * `id_key` with the session tables' partition count, and their keys include
 * it (`(id_key, sid)`): co-located with the session's rows.
 */
function searchTables(layout: Layout): string[] {
  return [
    `CREATE TABLE dsh_event_text (
      id_key bytea NOT NULL,
      sid bigint NOT NULL,
      seq integer NOT NULL,
      type text NOT NULL,
      body text NOT NULL,
      tsv tsvector NOT NULL,
      PRIMARY KEY (id_key, sid, seq),
      FOREIGN KEY (id_key, sid) REFERENCES dsh_sessions (id_key, sid) ON DELETE CASCADE
    ) PARTITION BY HASH (id_key)`,
    ...partitionsOf('dsh_event_text', layout),
    'CREATE INDEX dsh_event_text_tsv ON dsh_event_text USING gin (tsv)',
    `CREATE TABLE dsh_search_progress (
      id_key bytea NOT NULL,
      sid bigint NOT NULL,
      indexed integer NOT NULL,
      PRIMARY KEY (id_key, sid),
      FOREIGN KEY (id_key, sid) REFERENCES dsh_sessions (id_key, sid) ON DELETE CASCADE
    ) PARTITION BY HASH (id_key)`,
    ...partitionsOf('dsh_search_progress', layout),
  ]
}

/**
 * Where the index's text is complete up to: the change-feed cursor of the
 * last catch-up that indexed every session the feed named (one row; any
 * writer's complete pass may store it, an older one only makes the next start
 * read more). A new instance starts from it instead of looking at every
 * session. Not per-session, so not partitioned (in Citus, a reference table).
 */
const CURSOR_TABLE = `CREATE TABLE dsh_search_cursor (
      one boolean PRIMARY KEY DEFAULT true CHECK (one),
      cursor text NOT NULL
    )`

/** The version 1 tables are moved here, copied into the partitioned ones and dropped, in the step's one transaction. */
const OLD = 'dsh_migrating_search'

export const SEARCH_SCHEMA = defineSchema(
  'search',
  [
    {
      version: 1,
      description: 'event text with tsvector and GIN',
      statements: [
        `CREATE TABLE dsh_event_text (
          sid bigint NOT NULL REFERENCES dsh_sessions (sid) ON DELETE CASCADE,
          seq integer NOT NULL,
          type text NOT NULL,
          body text NOT NULL,
          tsv tsvector NOT NULL,
          PRIMARY KEY (sid, seq)
        )`,
        'CREATE INDEX dsh_event_text_tsv ON dsh_event_text USING gin (tsv)',
        `CREATE TABLE dsh_search_progress (
          sid bigint PRIMARY KEY REFERENCES dsh_sessions (sid) ON DELETE CASCADE,
          indexed integer NOT NULL
        )`,
      ],
    },
    {
      version: 2,
      description: 'the search tables are hash-partitioned on id_key beside the session tables, and every key includes it',
      // The session tables are at their partitioned version already (they migrate first): rows re-key through them.
      statements: (layout) => [
        `CREATE SCHEMA ${OLD}`,
        `ALTER TABLE dsh_event_text SET SCHEMA ${OLD}`,
        `ALTER TABLE dsh_search_progress SET SCHEMA ${OLD}`,
        ...searchTables(layout),
        `INSERT INTO dsh_event_text (id_key, sid, seq, type, body, tsv)
         SELECT s.id_key, t.sid, t.seq, t.type, t.body, t.tsv FROM ${OLD}.dsh_event_text t JOIN dsh_sessions s USING (sid)`,
        `INSERT INTO dsh_search_progress (id_key, sid, indexed)
         SELECT s.id_key, p.sid, p.indexed FROM ${OLD}.dsh_search_progress p JOIN dsh_sessions s USING (sid)`,
        `DROP SCHEMA ${OLD} CASCADE`,
      ],
    },
    {
      version: 3,
      description: 'the feed cursor the index is complete up to, so a new instance starts from it',
      statements: [CURSOR_TABLE],
    },
  ],
  { baseline: (layout) => [...searchTables(layout), CURSOR_TABLE] },
)

/** The component name of the search tables in `dsh_schema_version`. */
export const SEARCH_COMPONENT = SEARCH_SCHEMA.component
export const SEARCH_MIGRATIONS = SEARCH_SCHEMA.migrations

/** Creates or upgrades the search tables (the session tables must exist: `migrate` of the persistence). */
export function migrateSearch(pool: pg.Pool, options: MigrateOptions = {}): Promise<MigrationReport> {
  return SEARCH_SCHEMA.migrate(pool, options)
}

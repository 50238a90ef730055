import { defineSchema, type MigrationReport } from '@dsh/session-persistence-postgres/backend'
import type pg from 'pg'

/**
 * Full-text search over the session tables of `@dsh/session-persistence-postgres`
 * (listing needs no table of its own: it reads `dsh_sessions` through its indexes).
 * One row per event with text; rows and progress go with their session lifecycle
 * (`ON DELETE CASCADE` on `sid`), so a deleted or re-created session never
 * answers with old text.
 */
export const SEARCH_SCHEMA = defineSchema('search', [
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
])

/** The component name of the search tables in `dsh_schema_version`. */
export const SEARCH_COMPONENT = SEARCH_SCHEMA.component
export const SEARCH_MIGRATIONS = SEARCH_SCHEMA.migrations

/** Creates or upgrades the search tables (the session tables must exist: `migrate` of the persistence). */
export function migrateSearch(pool: pg.Pool): Promise<MigrationReport> {
  return SEARCH_SCHEMA.migrate(pool)
}

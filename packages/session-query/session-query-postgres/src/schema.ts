import { applyMigrations, type Migration, type MigrationReport } from '@dsh/session-persistence-postgres'
import type pg from 'pg'

/** The component name of the search tables in `dsh_schema_version`. */
export const SEARCH_COMPONENT = 'search'

/**
 * Full-text search over the session tables of `@dsh/session-persistence-postgres`
 * (listing needs no table of its own: it reads `dsh_sessions` through its indexes).
 * One row per event with text; rows and progress go with their session lifecycle
 * (`ON DELETE CASCADE` on `sid`), so a deleted or re-created session never
 * answers with old text.
 */
export const SEARCH_MIGRATIONS: readonly Migration[] = [
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
]

export function migrateSearch(pool: pg.Pool): Promise<MigrationReport> {
  return applyMigrations(pool, SEARCH_COMPONENT, SEARCH_MIGRATIONS)
}

import type pg from 'pg'
import { isTimeout, isUnreachable, PostgresPersistenceError, poolLocation, sqlStateOf, unavailable } from './errors.js'
import { type Layout, resolveLayout } from './layout.js'

/**
 * One schema step of one component. Steps run in order, each in its own
 * transaction with the component's version bump, so a database is always at
 * exactly one version of each component.
 */
export interface Migration {
  /** 1, 2, 3, … without gaps. */
  readonly version: number
  readonly description: string
  /**
   * Statements run in order inside the step's transaction; a function gets
   * the database's layout (its partition count, `layout.ts`).
   */
  readonly statements: readonly string[] | ((layout: Layout) => readonly string[])
}

/** How a component migrates beyond its steps. */
export interface SchemaOptions {
  /**
   * The newest version's tables, created directly on a database that holds
   * none of the component's tables (version 0): a fresh database is built
   * in one step at the newest version, and the steps only upgrade databases
   * that already hold an older one.
   */
  readonly baseline?: (layout: Layout) => readonly string[]
}

/** What one run of a component's migration may choose. */
export interface MigrateOptions {
  /**
   * The partition count of the per-session tables (1–1024; default 16). It is
   * chosen once, by the first migration that creates partitioned tables, and
   * recorded in `dsh_layout`; a later run asking for another count is refused
   * with `POSTGRES_PERSISTENCE_MIGRATION_FAILED`.
   */
  readonly partitions?: number
}

/** What `applyMigrations` did. */
export interface MigrationReport {
  readonly component: string
  readonly from: number
  readonly to: number
}

// Every component's migrations serialize on one transaction-level advisory
// lock, so hosts starting together migrate once and the others wait.
const MIGRATION_LOCK = 0x64736800 // 'dsh\0'

// Created only when absent (checked under the lock first): a migrated
// database then opens, and finds nothing to migrate, without CREATE on its
// schema. IF NOT EXISTS still, for a host of another version that creates it
// without looking.
const VERSION_TABLE = `CREATE TABLE IF NOT EXISTS dsh_schema_version (
  component text PRIMARY KEY,
  version integer NOT NULL CHECK (version >= 0),
  migrated_at timestamptz NOT NULL DEFAULT now()
)`

type PoolLike = Parameters<typeof unavailable>[0]

/** What the person opening can do about a failure the server explained with `state`, when the state says. */
function remedy(state: string | undefined, reading: boolean): string | undefined {
  if (state === '42501')
    return reading
      ? 'The connecting role may not read the dsh tables: grant it SELECT on them (GRANT SELECT ON ALL TABLES IN SCHEMA public TO <role>).'
      : "The connecting role lacks a privilege migrating needs (CREATE on the schema, ownership of the dsh tables): run 'dsh migrate' as the database's owner, or grant this role CREATE on the schema (GRANT CREATE ON SCHEMA public TO <role>). A database already migrated opens with SELECT on the dsh tables alone."
  if (state === '25006')
    return "The server takes only read-only transactions (a standby, for instance after a failover, or default_transaction_read_only = on): point the connection string at the primary and run 'dsh migrate' there."
  if (state !== undefined && isTimeout({ code: state }))
    return reading
      ? 'The server is up, but the statement ran past statement_timeout or lock_timeout (a lock held on dsh_schema_version, or a busy server) or an operator cancelled it: retry, or raise statement_timeout.'
      : 'The server is up, but a statement ran past statement_timeout or lock_timeout (another host may hold the migration lock while it migrates) or an operator cancelled it: retry, or raise the timeout for the migration.'
  return undefined
}

/**
 * Types a failure of opening `component`: a server that cannot be reached,
 * refused us or went away (a connection-class SQLSTATE, a shutdown, a socket
 * error) is `POSTGRES_PERSISTENCE_UNAVAILABLE`; anything else the server
 * answered (a missing privilege, a read-only server, a timeout) is
 * `POSTGRES_PERSISTENCE_MIGRATION_FAILED`, with the SQLSTATE in `details` and
 * what to do about it. A typed error passes unchanged.
 */
function openFailure(pool: PoolLike, component: string, error: unknown, reading: boolean): PostgresPersistenceError {
  if (error instanceof PostgresPersistenceError) return error
  if (isUnreachable(error)) return unavailable(pool, error)
  const state = sqlStateOf(error)
  const what = reading
    ? `Reading the ${component} schema version from the PostgreSQL database at ${poolLocation(pool)}`
    : `Migrating ${component} in the PostgreSQL database at ${poolLocation(pool)}`
  const timedOut = state !== undefined && isTimeout(error)
  return new PostgresPersistenceError(
    'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
    `${what} ${timedOut ? 'timed out' : 'failed'}: ${error instanceof Error ? error.message : String(error)}${state === undefined ? '' : ` (SQLSTATE ${state})`}. ${
      remedy(state, reading) ??
      (reading
        ? 'Retry; if it persists, check the server log.'
        : 'The database is left at the last version that committed; fix the cause and migrate again.')
    }`,
    { cause: error, details: { component, ...(state === undefined ? {} : { sqlState: state }) } },
  )
}

/**
 * Brings `component` up to the newest of `migrations`. A database already
 * newer than this code knows is refused with `POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW`
 * (never a migration downwards); a failed step leaves the last committed
 * version and rejects with `POSTGRES_PERSISTENCE_MIGRATION_FAILED`. Every
 * failure is typed (`openFailure`): a lost or refused server is
 * `POSTGRES_PERSISTENCE_UNAVAILABLE`, anything else the server answered
 * `POSTGRES_PERSISTENCE_MIGRATION_FAILED` with `details.sqlState`.
 */
export async function applyMigrations(
  pool: pg.Pool,
  component: string,
  migrations: readonly Migration[],
  options: MigrateOptions & SchemaOptions = {},
): Promise<MigrationReport> {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1)
      throw new PostgresPersistenceError(
        'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
        `Migration ${i} of ${component} has version ${m.version}; versions run 1, 2, 3, … without gaps.`,
      )
  })
  const latest = migrations.length
  const client = await pool.connect().catch((error: unknown) => {
    throw unavailable(pool as unknown as PoolLike, error)
  })
  // A checked-out connection the server drops between statements emits `error`; unheard, it would end the process.
  let lost = false
  const onLost = () => {
    lost = true
  }
  client.on('error', onLost)
  // The version before this call: read once, in the first transaction.
  let from: number | undefined
  try {
    for (;;) {
      await client.query('BEGIN')
      try {
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
        const { rows: found } = await client.query<{ present: boolean }>(`SELECT to_regclass('dsh_schema_version') IS NOT NULL AS present`)
        if (found[0]?.present !== true) await client.query(VERSION_TABLE)
        const { rows } = await client.query<{ version: number }>('SELECT version FROM dsh_schema_version WHERE component = $1', [component])
        const current = rows[0]?.version ?? 0
        from ??= current
        if (current > latest) {
          throw new PostgresPersistenceError(
            'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW',
            `The database holds ${component} schema version ${current}, newer than the ${latest} this dsh knows. Upgrade dsh on this host; schemas never migrate down.`,
            { details: { component, version: current, known: latest } },
          )
        }
        // A requested count is checked against the recorded one even when nothing is left to migrate.
        const layout = options.partitions === undefined ? undefined : await resolveLayout(client, options.partitions)
        const baseline = current === 0 ? options.baseline : undefined
        const step: Migration | undefined =
          baseline === undefined
            ? migrations[current]
            : { version: latest, description: 'the newest tables, created at once', statements: baseline }
        if (step === undefined) {
          await client.query('COMMIT')
          return { component, from, to: current }
        }
        try {
          const statements =
            typeof step.statements === 'function' ? step.statements(layout ?? (await resolveLayout(client, undefined))) : step.statements
          for (const statement of statements) await client.query(statement)
        } catch (error) {
          if (error instanceof PostgresPersistenceError) throw error
          if (isUnreachable(error)) throw unavailable(pool as unknown as PoolLike, error)
          const state = sqlStateOf(error)
          const hint = remedy(state, false)
          throw new PostgresPersistenceError(
            'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
            `Migrating ${component} to version ${step.version} (${step.description}) failed: ${(error as Error).message}${state === undefined ? '' : ` (SQLSTATE ${state})`}. The database stays at version ${current}.${hint === undefined ? '' : ` ${hint}`}`,
            { cause: error, details: { component, version: current, ...(state === undefined ? {} : { sqlState: state }) } },
          )
        }
        await client.query(
          `INSERT INTO dsh_schema_version (component, version) VALUES ($1, $2)
           ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version, migrated_at = now()`,
          [component, step.version],
        )
        await client.query('COMMIT')
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {})
        throw error
      }
    }
  } catch (error) {
    // BEGIN, the lock, the version table and COMMIT fail as a step does: typed.
    throw openFailure(pool as unknown as PoolLike, component, error, false)
  } finally {
    client.removeListener('error', onLost)
    client.release(lost ? true : undefined)
  }
}

/** The schema version of `component` in the database (0 when never migrated). */
export async function schemaVersion(pool: pg.Pool, component: string): Promise<number> {
  const { rows } = await pool
    .query<{ version: number }>(
      `SELECT version FROM dsh_schema_version WHERE component = $1 AND to_regclass('dsh_schema_version') IS NOT NULL`,
      [component],
    )
    .catch((error: unknown) => {
      if (sqlStateOf(error) === '42P01') return { rows: [] as { version: number }[] }
      throw openFailure(pool as unknown as PoolLike, component, error, true)
    })
  return rows[0]?.version ?? 0
}

/**
 * For hosts opened without migrating: `component` must be exactly at the
 * newest of `migrations`. Newer is `POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW`
 * (upgrade dsh), older or absent is `POSTGRES_PERSISTENCE_MIGRATION_FAILED`
 * naming `dsh migrate`.
 */
export async function requireSchema(pool: pg.Pool, component: string, migrations: readonly Migration[]): Promise<void> {
  const version = await schemaVersion(pool, component)
  const known = migrations.length
  if (version > known) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW',
      `The database holds ${component} schema version ${version}, newer than the ${known} this dsh knows. Upgrade dsh on this host; schemas never migrate down.`,
      {
        details: { component, version, known },
      },
    )
  }
  if (version < known) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
      `The database holds ${component} schema version ${version}; run 'dsh migrate' (or open with migrate: true) to bring it to ${known}.`,
      {
        details: { component, version, known },
      },
    )
  }
}

/**
 * One schema component (a set of tables with its own version row in
 * `dsh_schema_version`): its name, its steps, and the two ways a host opens
 * on it. Every PostgreSQL package declares its tables with `defineSchema`, so
 * each opens, migrates and refuses alike.
 */
export interface SchemaComponent {
  readonly component: string
  readonly migrations: readonly Migration[]
  /** Creates or upgrades the tables (idempotent; safe from several hosts at once). See `applyMigrations`. */
  migrate(pool: pg.Pool, options?: MigrateOptions): Promise<MigrationReport>
  /** The tables must be exactly at the newest version (`requireSchema`). */
  require(pool: pg.Pool): Promise<void>
  /** What an open does: migrate when `migrate` is true, else require the newest version (a typed refusal otherwise). */
  open(pool: pg.Pool, migrate: boolean): Promise<void>
}

export function defineSchema(component: string, migrations: readonly Migration[], schemaOptions: SchemaOptions = {}): SchemaComponent {
  const schema: SchemaComponent = {
    component,
    migrations,
    migrate: (pool, options = {}) => applyMigrations(pool, component, migrations, { ...schemaOptions, ...options }),
    require: (pool) => requireSchema(pool, component, migrations),
    open: async (pool, migrate) => {
      if (migrate) await schema.migrate(pool)
      else await schema.require(pool)
    },
  }
  return Object.freeze(schema)
}

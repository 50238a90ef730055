import { migratePostgres } from '@dsh/host'
import { type CommandIo, intOption, noPositionals, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { printJson } from '../output.js'
import { safe } from '../terminal.js'

/**
 * Brings a PostgreSQL store's schema (sessions, search, projection cache) to
 * the newest version this dsh knows, without serving. Idempotent: a second
 * run changes nothing and says so. A database newer than this dsh is refused
 * with `POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW` (exit 1) and left untouched.
 * `--partitions N` chooses the hash partition count of the per-session
 * tables (default 16) on the run that creates them; it is recorded in the
 * database, and a later run asking for another count is refused.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  if (command.store === undefined) {
    throw new CliError('CLI_USAGE', "'dsh migrate' migrates a PostgreSQL store: pass --store postgres://… or set DSH_DATABASE_URL.")
  }
  const partitions = intOption(command, 'partitions')
  const { location, components } = await migratePostgres({
    connectionString: command.store,
    ...(partitions === undefined ? {} : { partitions }),
  })
  if (command.json) {
    printJson({ store: location, components }, io.out)
    return 0
  }
  for (const { component, from, to } of components) {
    io.out.write(safe`${component}: ${from === to ? `at version ${to} (up to date)` : `migrated from version ${from} to ${to}`}\n`)
  }
  const changed = components.some((c) => c.from !== c.to)
  io.out.write(safe`${changed ? 'Migrated' : 'Nothing to do:'} ${location}${changed ? '' : ' is up to date'}.\n`)
  return 0
}

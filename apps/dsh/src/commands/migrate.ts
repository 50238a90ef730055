import { migratePostgres } from '@dsh/host'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { printJson } from '../output.js'
import { safe } from '../terminal.js'

/**
 * Brings a PostgreSQL store's schema (sessions, search, projection cache) to
 * the newest version this dsh knows, without serving. Idempotent: a second
 * run changes nothing and says so. A database newer than this dsh is refused
 * with `POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW` (exit 1) and left untouched.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  if (command.store === undefined) {
    throw new CliError('CLI_USAGE', "'dsh migrate' migrates a PostgreSQL store: pass --store postgres://… or set DSH_DATABASE_URL.")
  }
  const { location, components } = await migratePostgres({ connectionString: command.store })
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

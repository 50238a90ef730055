import { type PriceTable, readPriceTable } from '@dsh/session-stats'
import type { CommandIo, ParsedCommand } from './command.js'

/** The environment variable naming a price table file when `--prices` is not given. */
export const PRICES_ENV = 'DSH_PRICES'

/**
 * The configured price table of a command (`--prices FILE`, else
 * `DSH_PRICES`), or `undefined` when none is. Read and validated before any
 * session is: a bad table fails fast with its own code.
 */
export async function priceTableOf(command: ParsedCommand, io: CommandIo): Promise<PriceTable | undefined> {
  const path = command.string('prices') ?? io.env[PRICES_ENV]
  return path === undefined || path === '' ? undefined : await readPriceTable(path)
}

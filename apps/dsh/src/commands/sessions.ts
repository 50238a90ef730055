import { resolve } from 'node:path'
import type { SessionListPageBody } from '@dsh/protocol'
import { wireSessionList } from '@dsh/protocol/bodies'
import { PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { CheckpointReader, projectionCachePath } from '@dsh/session-projection-cache'
import type { SessionListFilter, SessionQueryRecord } from '@dsh/session-query'
import { LISTING_UNITS, type ListingValues, listingValuesOfStates, type PriceTable } from '@dsh/session-stats'
import { type CommandIo, limitOption, noPositionals, type ParsedCommand } from '../command.js'
import { terminalLogger } from '../host-open.js'
import { formatTime, printJson, table } from '../output.js'
import { priceTableOf } from '../prices.js'
import { withQueryHost } from '../query-access.js'
import { safe } from '../terminal.js'

/**
 * The live-preferred session list. Read-only: an existing root, nothing
 * created. Title, tokens and cost come from the projection cache (the
 * `sessionTitle` and `sessionStats` checkpoint rows, one primary-key read
 * each from the root's SQLite cache, or with `--store` one statement for the
 * page from the database's checkpoint table; checked against the units'
 * schemas); a session not cached lists them blank until a later fold fills
 * the cache: the listing never reads a log.
 * Cost uses the price table of `--prices FILE` or `DSH_PRICES`, as `dsh stats`
 * does; an unknown cost is `–` with its reason (`unknown-model`,
 * `usage-not-recorded`, `stats-unavailable` for a session not cached), never
 * 0, and the column is blank without a price table. `--json` prints the
 * protocol's `SessionListPageBody`, the body of `GET /api/sessions`.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command, '; filter with --parent, --origin, --cwd')
  const limit = limitOption(command, PAGE_MAX_LIMIT)
  const parent = command.string('parent')
  const origin = command.string('origin')
  // Stored headers hold the absolute working directory (`process.cwd()`), so a relative `--cwd`, `.` or a trailing slash names the same one.
  const cwdOption = command.string('cwd')
  const cwd = cwdOption === undefined ? undefined : resolve(cwdOption)
  const cursor = command.string('cursor')
  const filter: SessionListFilter = {
    ...(parent === undefined ? {} : { parentSession: parent }),
    ...(origin === undefined ? {} : { origin: origin as 'subagent' }),
    ...(cwd === undefined ? {} : { cwd }),
    ...(limit === undefined ? {} : { limit }),
    ...(cursor === undefined ? {} : { cursor }),
  }
  const prices = await priceTableOf(command, io)
  const { page, values } = await withQueryHost(
    command,
    async (host) => {
      const page = await host.query.listSessions(filter)
      const values =
        command.store === undefined
          ? cachedValues(projectionCachePath(host.root), page.records, prices, io)
          : await storedValues(command.store, page.records, prices, io)
      return { page, values }
    },
    io,
  )
  if (command.json) {
    const body: SessionListPageBody = wireSessionList(page, values)
    printJson(body, io.out)
    return 0
  }
  io.out.write(
    `${table(
      ['id', 'created', 'origin', 'parent', 'depth', 'cut', 'tokens', 'cost', 'title'],
      page.records.map((r, i) => {
        const { title, tokens, cost, costReason } = values[i] ?? { title: null, tokens: null, cost: null }
        return [
          r.header.id,
          formatTime(r.header.createdAt),
          r.header.origin ?? '-',
          r.header.parentSession ?? '-',
          String(r.header.delegationDepth),
          String(r.inheritedEventCount),
          tokens === null ? '' : String(tokens),
          costCell(cost, costReason),
          title ?? '',
        ]
      }),
    )}\n`,
  )
  io.out.write(safe`${page.records.length} session(s)`)
  io.out.write(page.nextCursor === undefined ? '\n' : safe`; next page: --cursor ${page.nextCursor}\n`)
  return 0
}

/** The cost column: USD, `–` with the reason it is unknown, or blank when nothing was priced (no price table). */
function costCell(cost: number | null, reason: ListingValues['costReason']): string {
  if (cost !== null) return `$${cost.toFixed(6)}`
  return reason === undefined || reason === 'no-price-table' ? '' : `– (${reason})`
}

/** Each record's cached title, tokens and cost: one checkpoint-row read per unit, never a log. */
function cachedValues(
  path: string,
  records: readonly SessionQueryRecord[],
  prices: PriceTable | undefined,
  io: CommandIo,
): ListingValues[] {
  const reader = new CheckpointReader(path, terminalLogger(io))
  try {
    return records.map((record) => {
      const states: Record<string, unknown> = {}
      for (const { key, stateVersion } of LISTING_UNITS)
        states[key] = reader.state(record.header, record.inheritedEventCount, key, stateVersion)
      return listingValuesOfStates(states, prices)
    })
  } finally {
    reader.close()
  }
}

/**
 * The same values from a PostgreSQL store's checkpoint table: one read-only
 * statement for the page, on a connection of its own (the query host's pool
 * is not shared). The reader and `pg` load only on this path.
 */
async function storedValues(
  url: string,
  records: readonly SessionQueryRecord[],
  prices: PriceTable | undefined,
  io: CommandIo,
): Promise<ListingValues[]> {
  if (records.length === 0) return []
  const [{ readCheckpointStates }, { poolConfig }, { default: pg }] = await Promise.all([
    import('@dsh/session-projection-cache-postgres'),
    import('@dsh/session-persistence-postgres'),
    import('pg'),
  ])
  const pool = new pg.Pool({ ...poolConfig(url), max: 1 })
  // A connection lost while idle; the read itself reports its failure.
  pool.on('error', () => {})
  try {
    const states = await readCheckpointStates(pool, records, LISTING_UNITS, terminalLogger(io))
    return states.map((state) => listingValuesOfStates(state, prices))
  } finally {
    await pool.end()
  }
}

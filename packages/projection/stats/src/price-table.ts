import { constants, promises as fsp } from 'node:fs'
import { SessionStatsError } from './errors.js'
import { type Check, exactly, failedAt, isNonEmptyString, isNonNegative, isString, recordOf } from './plain-check.js'
import type { ModelPrice, PriceTable } from './price-types.js'

const isPrice: Check = isNonNegative
const isPriceTable = exactly(
  {
    description: isString,
    currency: (value) => value === 'USD',
    providers: recordOf(
      isNonEmptyString,
      recordOf(
        isNonEmptyString,
        exactly({ input: isPrice, output: isPrice, cacheRead: isPrice, cacheWrite: isPrice, reasoning: isPrice }, [
          'cacheRead',
          'cacheWrite',
          'reasoning',
        ]),
      ),
    ),
  },
  ['description'],
)

/**
 * Validates a price table (parsed JSON); rejects with
 * `SESSION_STATS_INVALID_PRICE_TABLE` naming every bad path. A plain check
 * (`plain-check.ts`) accepts a valid table without loading a schema library;
 * a table it refuses is parsed by the zod schema (`price-table-zod.ts`,
 * loaded then), which accepts what the plain check was stricter about (an
 * object without a prototype) and words every issue of what it rejects.
 */
export async function parsePriceTable(input: unknown, source = 'the price table'): Promise<PriceTable> {
  if (isPriceTable(input)) return input as PriceTable
  failedAt()
  const { priceTableSchema } = await import('./price-table-zod.js')
  const parsed = priceTableSchema.safeParse(input)
  if (parsed.success) return parsed.data
  const issues = parsed.error.issues.map((issue) => `${issue.path.length === 0 ? '(root)' : issue.path.join('.')}: ${issue.message}`)
  throw new SessionStatsError(
    'SESSION_STATS_INVALID_PRICE_TABLE',
    `${source} is not a valid price table (${issues.join('; ')}). Expected { "currency": "USD", "providers": { "<provider>": { "<model>": { "input": n, "output": n, "cacheRead"?: n, "cacheWrite"?: n, "reasoning"?: n } } } } with USD per million tokens; see examples/prices.example.json.`,
    { details: { issues } },
  )
}

/**
 * The largest price table file `readPriceTable` reads, in bytes (1 MiB). A
 * table lists a few prices per model: a generous bound that a real table
 * never nears, and that keeps a wrong path (a log, a device) from being read
 * into memory whole.
 */
export const PRICE_TABLE_MAX_BYTES = 1024 * 1024

function unreadable(path: string, why: string, details: Record<string, unknown> = {}, cause?: unknown): SessionStatsError {
  return new SessionStatsError('SESSION_STATS_PRICE_TABLE_UNREADABLE', `Cannot read price table '${path}': ${why}.`, {
    ...(cause === undefined ? {} : { cause }),
    details: { path, ...details },
  })
}

function kindOf(stat: {
  isDirectory(): boolean
  isFIFO(): boolean
  isCharacterDevice(): boolean
  isBlockDevice(): boolean
  isSocket(): boolean
}): string {
  if (stat.isDirectory()) return 'a directory'
  if (stat.isFIFO()) return 'a FIFO'
  if (stat.isCharacterDevice()) return 'a character device'
  if (stat.isBlockDevice()) return 'a block device'
  if (stat.isSocket()) return 'a socket'
  return 'not a regular file'
}

/**
 * The text of a price table file: a regular file (a symbolic link to one is
 * followed) of at most `PRICE_TABLE_MAX_BYTES`. The file is opened without
 * blocking, so a FIFO is refused rather than waited on, and its type is
 * checked on the open descriptor before a byte is read; at most one byte past
 * the bound is ever read, so a file that grows after the check is refused too.
 */
async function readBoundedText(path: string): Promise<string> {
  let handle: fsp.FileHandle
  try {
    handle = await fsp.open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0))
  } catch (error) {
    throw unreadable(path, (error as Error).message, {}, error)
  }
  try {
    const stat = await handle.stat()
    if (!stat.isFile()) {
      throw unreadable(path, `it is ${kindOf(stat)}, not a regular file; pass the path of a JSON file (see examples/prices.example.json)`, {
        reason: 'not-a-regular-file',
      })
    }
    const tooLarge = (size: string) =>
      unreadable(
        path,
        `it is ${size}, over the ${PRICE_TABLE_MAX_BYTES}-byte (1 MiB) limit for a price table (PRICE_TABLE_MAX_BYTES); keep only the providers and models you price`,
        { reason: 'too-large', limit: PRICE_TABLE_MAX_BYTES },
      )
    if (stat.size > PRICE_TABLE_MAX_BYTES) throw tooLarge(`${stat.size} bytes`)
    const buffer = Buffer.alloc(PRICE_TABLE_MAX_BYTES + 1)
    let length = 0
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length)
      if (bytesRead === 0) break
      length += bytesRead
      if (length > PRICE_TABLE_MAX_BYTES) throw tooLarge(`more than ${PRICE_TABLE_MAX_BYTES} bytes`)
    }
    return buffer.toString('utf8', 0, length)
  } catch (error) {
    if (error instanceof SessionStatsError) throw error
    throw unreadable(path, (error as Error).message, {}, error)
  } finally {
    await handle.close()
  }
}

/**
 * Reads and validates a price table file (JSON); rejects as `parsePriceTable`
 * does, or with `SESSION_STATS_PRICE_TABLE_UNREADABLE` when the file cannot
 * be read, is not a regular file, is over `PRICE_TABLE_MAX_BYTES`, or is not JSON.
 */
export async function readPriceTable(path: string): Promise<PriceTable> {
  const text = await readBoundedText(path)
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new SessionStatsError('SESSION_STATS_PRICE_TABLE_UNREADABLE', `Price table '${path}' is not JSON: ${(error as Error).message}.`, {
      cause: error,
      details: { path },
    })
  }
  return parsePriceTable(json, `price table '${path}'`)
}

/** The price of `model` at `provider`, or undefined (own keys only: a model named `constructor` is unknown, not a function). */
export function priceOf(table: PriceTable, provider: string, model: string): ModelPrice | undefined {
  if (!Object.hasOwn(table.providers, provider)) return undefined
  const models = table.providers[provider] as PriceTable['providers'][string]
  return Object.hasOwn(models, model) ? models[model] : undefined
}

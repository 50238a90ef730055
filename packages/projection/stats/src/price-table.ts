import { readFileSync } from 'node:fs'
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

/** Reads and validates a price table file (JSON); rejects as `parsePriceTable` does. */
export async function readPriceTable(path: string): Promise<PriceTable> {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new SessionStatsError('SESSION_STATS_PRICE_TABLE_UNREADABLE', `Cannot read price table '${path}': ${(error as Error).message}.`, {
      cause: error,
      details: { path },
    })
  }
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

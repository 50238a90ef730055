import { readFileSync } from 'node:fs'
import { z } from 'zod/mini'
import { SessionStatsError } from './errors.js'

/** USD per million tokens of each kind. `reasoning` defaults to `output`; a missing cache price leaves cached tokens unpriced. */
export interface ModelPrice {
  readonly input: number
  readonly output: number
  readonly cacheRead?: number
  readonly cacheWrite?: number
  readonly reasoning?: number
}

/** A configured price table: `providers[provider][model]`. Applied at view time, never stored in a projection. */
export interface PriceTable {
  /** What the table is and where its figures come from. */
  readonly description?: string
  readonly currency: 'USD'
  readonly providers: { readonly [provider: string]: { readonly [model: string]: ModelPrice } }
}

// zod/mini (a listing prices its rows without loading classic zod), with English issue messages.
z.config(z.locales.en())
const price = z.number().check(z.nonnegative(), z.refine(Number.isFinite, 'must be a finite number of USD per million tokens'))
const modelPriceSchema = z.strictObject({
  input: price,
  output: price,
  cacheRead: z.exactOptional(price),
  cacheWrite: z.exactOptional(price),
  reasoning: z.exactOptional(price),
})
const name = z.string().check(z.minLength(1))
const priceTableSchema: z.ZodMiniType<PriceTable> = z.strictObject({
  description: z.exactOptional(z.string()),
  currency: z.literal('USD'),
  providers: z.record(name, z.record(name, modelPriceSchema)),
})

/** Validates a price table (parsed JSON); throws `SESSION_STATS_INVALID_PRICE_TABLE` naming every bad path. */
export function parsePriceTable(input: unknown, source = 'the price table'): PriceTable {
  const parsed = priceTableSchema.safeParse(input)
  if (parsed.success) return parsed.data
  const issues = parsed.error.issues.map((issue) => `${issue.path.length === 0 ? '(root)' : issue.path.join('.')}: ${issue.message}`)
  throw new SessionStatsError(
    'SESSION_STATS_INVALID_PRICE_TABLE',
    `${source} is not a valid price table (${issues.join('; ')}). Expected { "currency": "USD", "providers": { "<provider>": { "<model>": { "input": n, "output": n, "cacheRead"?: n, "cacheWrite"?: n, "reasoning"?: n } } } } with USD per million tokens; see examples/prices.example.json.`,
    { details: { issues } },
  )
}

/** Reads and validates a price table file (JSON). */
export function readPriceTable(path: string): PriceTable {
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

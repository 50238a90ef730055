import { z } from 'zod/mini'
import type { PriceTable } from './price-types.js'

// zod/mini, with English issue messages: loaded only for a table the plain check refuses.
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

/** The price table's schema in zod: it words the issues of a table the plain check (`price-table.ts`) refuses. */
export const priceTableSchema: z.ZodMiniType<PriceTable> = z.strictObject({
  description: z.exactOptional(z.string()),
  currency: z.literal('USD'),
  providers: z.record(name, z.record(name, modelPriceSchema)),
})

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

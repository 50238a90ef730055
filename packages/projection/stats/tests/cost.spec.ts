import { spawn, spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from '@dsh/test-kit'
import { describe, expect, it, onTestFinished } from 'vitest'
import { costOf, PRICE_TABLE_MAX_BYTES, type PriceTable, parsePriceTable, readPriceTable } from '../src/index.js'
import { host, SECOND_TURN, TWO_TURNS } from './helpers.js'
import { V0_TURN } from './v0-events.js'

const EXAMPLE = fileURLToPath(new URL('../examples/prices.example.json', import.meta.url))

const TABLE: PriceTable = await parsePriceTable({
  currency: 'USD',
  providers: {
    'example-provider': { 'example-model': { input: 1, output: 4, cacheRead: 0.1 } },
    cheap: { small: { input: 0.5, output: 1 } },
  },
})

function statsOf(script: typeof TWO_TURNS) {
  const h = host()
  const session = h.sessions.create()
  h.play(session, script)
  return h.stats(session)
}

const step = (provider: string, model: string, usage?: object) => [
  { type: 'turn/start', data: { turn: 1 } },
  { type: 'step/start', data: { turn: 1, step: 0, provider, model } },
  { type: 'assistant/message', data: { turn: 1, text: 'x' } },
  { type: 'step/end', data: { turn: 1, step: 0, ...(usage === undefined ? {} : { usage }), finish: 'stop' } },
  { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
]

describe('costOf', () => {
  it('prices tokens by kind per model at view time (USD per million; reasoning at the output price unless priced)', async () => {
    const cost = costOf(statsOf(TWO_TURNS.slice(0, SECOND_TURN)), TABLE)
    // 110 input, 25 output, 50 cacheRead, 5 reasoning (at the output price).
    const usd = (110 * 1 + 25 * 4 + 50 * 0.1 + 5 * 4) / 1_000_000
    expect(cost).toEqual({
      usd: expect.closeTo(usd, 15),
      byModel: [{ provider: 'example-provider', model: 'example-model', usd: expect.closeTo(usd, 15) }],
    })
    // Another table re-prices the same stats: nothing of a price is stored.
    const doubled = await parsePriceTable({
      currency: 'USD',
      providers: { 'example-provider': { 'example-model': { input: 2, output: 8, cacheRead: 0.2 } } },
    })
    expect(costOf(statsOf(TWO_TURNS.slice(0, SECOND_TURN)), doubled).usd).toBeCloseTo(2 * usd, 15)
  })

  it('an unknown model is null with a reason, never 0', () => {
    expect(costOf(statsOf(step('example-provider', 'unlisted', { input: 1, output: 1 })), TABLE)).toEqual({
      usd: null,
      reason: 'unknown-model',
      byModel: [{ provider: 'example-provider', model: 'unlisted', usd: null, reason: 'unknown-model' }],
      pricedUsd: 0,
    })
    expect(costOf(statsOf(step('unlisted-provider', 'small', { input: 1, output: 1 })), TABLE)).toMatchObject({
      usd: null,
      reason: 'unknown-model',
    })
    // Own keys only: a model named like an Object.prototype member is unknown, not a function.
    expect(costOf(statsOf(step('cheap', 'constructor', { input: 1, output: 1 })), TABLE)).toMatchObject({
      usd: null,
      reason: 'unknown-model',
    })
  })

  it('calls whose model is not recorded, unpriced token kinds and calls without usage make the cost unknown', () => {
    // Turn 2 of the script names no model: the whole is unknown, the priced part is a lower bound.
    const whole = costOf(statsOf(TWO_TURNS), TABLE)
    expect(whole).toMatchObject({ usd: null, reason: 'model-not-recorded' })
    expect(whole.usd === null && whole.pricedUsd).toBeGreaterThan(0)
    expect(costOf(statsOf(step('cheap', 'small', { input: 1, output: 1, cacheWrite: 7 })), TABLE)).toMatchObject({
      usd: null,
      reason: 'missing-price',
      byModel: [{ provider: 'cheap', model: 'small', usd: null, reason: 'missing-price', kinds: ['cacheWrite'] }],
    })
    expect(costOf(statsOf(step('cheap', 'small')), TABLE)).toMatchObject({ usd: null, reason: 'usage-not-recorded' })
    expect(costOf(statsOf(step('cheap', 'small', { input: 1_000_000, output: 2_000_000 })), TABLE)).toEqual({
      usd: 2.5,
      byModel: [{ provider: 'cheap', model: 'small', usd: 2.5 }],
    })
    // No model call at all costs nothing.
    expect(costOf(statsOf([{ type: 'user/message', data: { text: 'hi' } }]), TABLE)).toEqual({ usd: 0, byModel: [] })
  })

  it('imported v0 messages name their model: an imported session is priced', async () => {
    const h = host()
    const session = h.sessions.restore(V0_TURN)
    const table = await parsePriceTable({
      currency: 'USD',
      providers: { deepseek: { 'deepseek-chat': { input: 1, output: 2, cacheRead: 0.5 } } },
    })
    expect(costOf(h.stats(session), table).usd).toBeCloseTo((620 * 1 + 90 * 2 + 64 * 0.5) / 1_000_000, 15)
  })
})

describe('price tables', () => {
  it('the shipped example validates and says it is an example', async () => {
    const table = await readPriceTable(EXAMPLE)
    expect(table.description).toMatch(/^EXAMPLE ONLY/)
    expect(Object.keys(table.providers)).toEqual(['example-provider', 'another-example-provider'])
  })

  it.each([
    ['another currency', { currency: 'EUR', providers: {} }, 'currency'],
    ['a negative price', { currency: 'USD', providers: { p: { m: { input: -1, output: 1 } } } }, 'providers.p.m.input'],
    ['a missing output price', { currency: 'USD', providers: { p: { m: { input: 1 } } } }, 'providers.p.m.output'],
    ['a misspelt kind', { currency: 'USD', providers: { p: { m: { input: 1, output: 1, cache_read: 1 } } } }, 'providers.p.m'],
    ['a price that is a string', { currency: 'USD', providers: { p: { m: { input: '1', output: 1 } } } }, 'providers.p.m.input'],
    ['not an object', [], '(root)'],
  ])('refuses %s with SESSION_STATS_INVALID_PRICE_TABLE naming the path', async (_why, input, path) => {
    let caught: unknown
    try {
      await parsePriceTable(input)
    } catch (error) {
      caught = error
    }
    expect(caught).toMatchObject({ code: 'SESSION_STATS_INVALID_PRICE_TABLE' })
    expect((caught as Error).message).toContain(`${path}:`)
  })

  it('a missing or non-JSON file is SESSION_STATS_PRICE_TABLE_UNREADABLE', async () => {
    const { dir, cleanup } = tempDir('dsh-prices-')
    onTestFinished(cleanup)
    await expect(readPriceTable(join(dir, 'missing.json'))).rejects.toThrow(
      expect.objectContaining({ code: 'SESSION_STATS_PRICE_TABLE_UNREADABLE' }),
    )
    writeFileSync(join(dir, 'bad.json'), '{ "currency": ')
    await expect(readPriceTable(join(dir, 'bad.json'))).rejects.toThrow(
      expect.objectContaining({ code: 'SESSION_STATS_PRICE_TABLE_UNREADABLE' }),
    )
    writeFileSync(join(dir, 'wrong.json'), '{ "currency": "USD" }')
    await expect(readPriceTable(join(dir, 'wrong.json'))).rejects.toThrow(
      expect.objectContaining({ code: 'SESSION_STATS_INVALID_PRICE_TABLE' }),
    )
  })

  /** A valid table of exactly `bytes` bytes (its description pads it). */
  function tableOfSize(bytes: number): string {
    const empty = JSON.stringify({ currency: 'USD', providers: {}, description: '' })
    return JSON.stringify({ currency: 'USD', providers: {}, description: 'x'.repeat(bytes - empty.length) })
  }

  async function refusal(path: string): Promise<{ code?: string; message: string; details?: Record<string, unknown> }> {
    try {
      await readPriceTable(path)
    } catch (error) {
      return error as { code?: string; message: string; details?: Record<string, unknown> }
    }
    throw new Error(`readPriceTable('${path}') resolved; a refusal was expected`)
  }

  it(`reads a table of exactly PRICE_TABLE_MAX_BYTES (1 MiB) and refuses one byte more, by its size, before parsing`, async () => {
    expect(PRICE_TABLE_MAX_BYTES).toBe(1024 * 1024)
    const { dir, cleanup } = tempDir('dsh-prices-')
    onTestFinished(cleanup)
    const exact = tableOfSize(PRICE_TABLE_MAX_BYTES)
    expect(Buffer.byteLength(exact)).toBe(PRICE_TABLE_MAX_BYTES)
    writeFileSync(join(dir, 'exact.json'), exact)
    expect((await readPriceTable(join(dir, 'exact.json'))).currency).toBe('USD')
    writeFileSync(join(dir, 'over.json'), tableOfSize(PRICE_TABLE_MAX_BYTES + 1))
    const refused = await refusal(join(dir, 'over.json'))
    expect(refused).toMatchObject({
      code: 'SESSION_STATS_PRICE_TABLE_UNREADABLE',
      details: { reason: 'too-large', limit: PRICE_TABLE_MAX_BYTES },
    })
    expect(refused.message).toContain(`${PRICE_TABLE_MAX_BYTES + 1} bytes, over the ${PRICE_TABLE_MAX_BYTES}-byte (1 MiB) limit`)
  })

  it.skipIf(process.platform === 'win32')('refuses a device or a directory as not a regular file without reading it', async () => {
    const { dir, cleanup } = tempDir('dsh-prices-')
    onTestFinished(cleanup)
    // /dev/null first: read as a file it is empty, which would be refused as "not JSON" instead.
    for (const [path, kind] of [
      ['/dev/null', 'a character device'],
      ['/dev/zero', 'a character device'],
      [dir, 'a directory'],
    ] as const) {
      const refused = await refusal(path)
      expect(refused).toMatchObject({ code: 'SESSION_STATS_PRICE_TABLE_UNREADABLE', details: { path, reason: 'not-a-regular-file' } })
      expect(refused.message).toContain(`it is ${kind}, not a regular file`)
    }
  })

  it.skipIf(process.platform === 'win32')('refuses a FIFO without waiting for a writer', async () => {
    const { dir, cleanup } = tempDir('dsh-prices-')
    onTestFinished(cleanup)
    const fifo = join(dir, 'prices.fifo')
    expect(spawnSync('mkfifo', ['-m', '600', fifo]).status).toBe(0)
    // A writer that delivers a valid table: read as a file, the FIFO would yield it and be accepted.
    const table = join(dir, 'table.json')
    writeFileSync(table, tableOfSize(100))
    const writer = spawn('sh', ['-c', 'cat "$1" > "$2"', 'sh', table, fifo], { stdio: 'ignore' })
    onTestFinished(() => {
      if (writer.exitCode === null) writer.kill()
    })
    const refused = await refusal(fifo)
    expect(refused).toMatchObject({ code: 'SESSION_STATS_PRICE_TABLE_UNREADABLE', details: { reason: 'not-a-regular-file' } })
    expect(refused.message).toContain('it is a FIFO, not a regular file')
  })
})

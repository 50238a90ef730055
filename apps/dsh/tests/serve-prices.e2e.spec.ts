import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { answer, type ModelServer, startModelServer } from '@dsh/driver-openai/testing'
import { tempDir } from '@dsh/test-kit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cleanEnv, dshRun, dshStart, until } from './support/dsh-process.js'

// `dsh serve --prices FILE` (else DSH_PRICES) as a user runs it: the built CLI
// serving a root whose one session's usage the local Chat Completions server
// (the only fake) reported, with the figure the HTTP API answers checked
// against the price table's arithmetic and against `dsh sessions --prices`.

const TOKEN = 'serve-prices-token-0123456789'
/** One model call: 1200 prompt tokens (200 of them cached), 300 completion tokens (100 of them reasoning). */
const USAGE = { prompt: 1200, completion: 300, cached: 200, reasoning: 100 }
/** USD per million tokens of the model the run used. */
const RATES = { input: 2, output: 8, cacheRead: 0.5, reasoning: 10 }
/** The disjoint counts: 1000 input, 200 output, 200 cache reads, 100 reasoning; 2000 + 1600 + 100 + 1000 micro-dollars. */
const EXPECTED_MICRO_USD = 1000 * RATES.input + 200 * RATES.output + 200 * RATES.cacheRead + 100 * RATES.reasoning

let dir: string
let root: string
let prices: string
let cleanup: () => void
let model: ModelServer
let sessionId: string

beforeAll(async () => {
  ;({ dir, cleanup } = tempDir('dsh-serve-prices-'))
  root = join(dir, 'root')
  model = await startModelServer(() => answer(['priced ', 'answer'], USAGE))
  const made = await dshRun(
    ['run', 'Price me.', '--root', root, '--base-url', model.baseURL, '--model', 'wombat-1'],
    env({ DSH_API_KEY: 'sk-prices' }),
  )
  expect(made.code, made.stdout + made.stderr).toBe(0)
  sessionId = /^session (\S+)$/m.exec(made.stdout)![1]!
  prices = join(dir, 'prices.json')
  writeFileSync(prices, JSON.stringify({ currency: 'USD', providers: { '127.0.0.1': { 'wombat-1': RATES } } }))
})

afterAll(async () => {
  await model.close()
  cleanup()
})

/** A clean environment without DSH_PRICES or DSH_TOKEN from the machine, plus `extra`. */
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const clean = cleanEnv()
  delete clean.DSH_PRICES
  delete clean.DSH_TOKEN
  return { ...clean, ...extra }
}

interface Listed {
  readonly header: { readonly id: string }
  readonly tokens: number | null
  readonly cost: number | null
}
interface Answers {
  readonly listed: Listed
  readonly stats: { readonly cost: { readonly usd: number | null } | null; readonly costReason?: string }
}

/** Starts `dsh serve`, reads the session's listing row and stats report over HTTP, then stops it with SIGTERM. */
async function served(args: readonly string[], extraEnv: Record<string, string> = {}): Promise<Answers> {
  const serving = dshStart(['serve', '--root', root, '--json', ...args], env({ DSH_TOKEN: TOKEN, ...extraEnv }))
  try {
    let url: string | undefined
    await until(() => {
      const match = /"url":\s*"([^"]+)"/.exec(serving.output())
      url = match?.[1]
      return url !== undefined
    }, `dsh serve to print its URL (${serving.output()})`)
    const get = async (path: string): Promise<unknown> => {
      const response = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } })
      expect(response.status, path).toBe(200)
      return await response.json()
    }
    const list = (await get('/api/sessions')) as { sessions: Listed[] }
    const listed = list.sessions.find((record) => record.header.id === sessionId)
    expect(listed, JSON.stringify(list)).toBeDefined()
    const stats = (await get(`/api/sessions/${encodeURIComponent(sessionId)}/stats`)) as Answers['stats']
    return { listed: listed!, stats }
  } finally {
    serving.child.kill('SIGTERM')
    expect(await serving.exited).toBe(0)
  }
}

describe('dsh serve --prices', () => {
  it("prices the listing's and the stats route's cost by the table; without one both are null", async () => {
    const plain = await served([])
    // The usage is known (cached at the run's end), so a null cost is the missing table and nothing else.
    expect(plain.listed.tokens).toBe(1500)
    expect(plain.listed.cost).toBeNull()
    expect(plain.stats.cost).toBeNull()
    expect(plain.stats.costReason).toBe('no-price-table')

    const priced = await served(['--prices', prices])
    expect(priced.listed.tokens).toBe(1500)
    expect(priced.listed.cost).not.toBeNull()
    expect(priced.listed.cost! * 1_000_000).toBeCloseTo(EXPECTED_MICRO_USD, 9)
    expect(priced.stats.cost?.usd).toBe(priced.listed.cost)

    // The same reader as `dsh sessions --prices`: the very same figure.
    const cli = await dshRun(['sessions', '--root', root, '--json', '--prices', prices], env())
    expect(cli.code, cli.stderr).toBe(0)
    const rows = JSON.parse(cli.stdout) as { sessions: Listed[] }
    expect(rows.sessions.find((record) => record.header.id === sessionId)?.cost).toBe(priced.listed.cost)

    // DSH_PRICES is the default when --prices is not given.
    const fromEnv = await served([], { DSH_PRICES: prices })
    expect(fromEnv.listed.cost).toBe(priced.listed.cost)
  })

  it('a bad price table is refused with its own code before the root is opened', async () => {
    const bad = join(dir, 'bad-prices.json')
    writeFileSync(bad, JSON.stringify({ currency: 'EUR', providers: {} }))
    const missingRoot = join(dir, 'no-root')
    const refused = await dshRun(['serve', '--root', missingRoot, '--prices', bad], env({ DSH_TOKEN: TOKEN }))
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining('SESSION_STATS_INVALID_PRICE_TABLE')])
    expect(existsSync(missingRoot)).toBe(false)
    const unreadable = await dshRun(['serve', '--root', root], env({ DSH_TOKEN: TOKEN, DSH_PRICES: join(dir, 'absent.json') }))
    expect([unreadable.code, unreadable.stderr]).toEqual([1, expect.stringContaining('SESSION_STATS_PRICE_TABLE_UNREADABLE')])
  })
})

import { cpSync } from 'node:fs'
import { join } from 'node:path'
import { isDshError } from '@dsh/context'
import type { SqliteSessionQuery } from '@dsh/session-query-sqlite'
import { tempDir } from '@dsh/test-kit'
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { createHost, type Host } from '../src/index.js'
import { writeSearchCorpus } from '../src/testing/index.js'

// One search must not stall the host. A host serving HTTP runs the
// SQLite index's request-serving statements in a worker thread, so while a
// search is stepping through every event that holds "the", the event loop
// (shared here by the server and this test's client) keeps answering.

const TOKEN = 'query-worker-token-0123456789'
const THE_249 = Array.from({ length: 249 }, () => 'the').join('+')
/** Sessions × events of the corpus: a bounded count, big enough that the search steps through 100,000 candidate rows. */
const SESSIONS = 40
const EVENTS = 2_500

let corpus: string
const cleanups: Array<() => void> = []

beforeAll(async () => {
  const { dir, cleanup } = tempDir('dsh-worker-corpus-')
  cleanups.push(cleanup)
  corpus = join(dir, 'root')
  await writeSearchCorpus(corpus, { sessions: SESSIONS, events: EVENTS })
})

/** A fresh copy of the corpus (index included) for one test. */
function freshRoot(): string {
  const { dir, cleanup } = tempDir('dsh-worker-')
  cleanups.push(cleanup)
  const root = join(dir, 'root')
  cpSync(corpus, root, { recursive: true })
  return root
}

let host: Host | undefined
afterEach(async () => {
  await host?.dispose()
  host = undefined
})
afterAll(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

const auth = { authorization: `Bearer ${TOKEN}` }
const metricsOf = (h: Host) => (h.query as SqliteSessionQuery).metrics

/** Yields to the event loop until `done()` holds; bounded by a count of turns, not by time. */
async function turnsUntil(done: () => boolean, maxTurns = 1_000_000): Promise<boolean> {
  for (let i = 0; i < maxTurns && !done(); i++) await new Promise((resolve) => setImmediate(resolve))
  return done()
}

describe('createHost({ http }): request-serving SQLite work off the event loop', () => {
  it('answers GET /app.css while a "the"×249 search is still running in the worker; the search answers within its budget', async () => {
    host = await createHost({ root: freshRoot(), requireExisting: true, http: { token: TOKEN } })
    const served = host
    const url = served.http!.url
    let settled = false
    const search = fetch(`${url}/api/search?q=${THE_249}`, { headers: auth }).finally(() => {
      settled = true
    })
    // The statement is posted to the worker (or, on an impossibly fast machine, already answered).
    expect(await turnsUntil(() => metricsOf(served).inFlight === 1 || settled)).toBe(true)
    let cssAnswered = 0
    let cssWhileRunning = 0
    const started = performance.now()
    while (!settled && cssAnswered < 10_000) {
      const css = await fetch(`${url}/app.css`)
      expect(css.status).toBe(200)
      await css.text()
      cssAnswered++
      if (!settled && metricsOf(served).inFlight === 1) cssWhileRunning++
    }
    const response = await search
    // The ordering is the verdict; the figure is only logged.
    console.log(`${cssWhileRunning} GET /app.css answered during one search (${Math.round(performance.now() - started)} ms)`)
    expect(cssWhileRunning).toBeGreaterThanOrEqual(1)
    const body = (await response.json()) as { hits?: unknown[]; code?: string }
    if (response.status === 200) expect(body.hits!.length).toBeGreaterThan(0)
    else expect({ status: response.status, code: body.code }).toEqual({ status: 503, code: 'SESSION_QUERY_BUDGET_EXCEEDED' })
    expect(metricsOf(served).requests).toBeGreaterThanOrEqual(1)
  })

  it('stops a search at its row budget with the typed 503 (queryBudget), counted in the metrics', async () => {
    host = await createHost({ root: freshRoot(), requireExisting: true, queryBudget: { ms: 600_000, rows: 1_000 }, http: { token: TOKEN } })
    const response = await fetch(`${host.http!.url}/api/search?q=${THE_249}`, { headers: auth })
    expect(response.status).toBe(503)
    const body = (await response.json()) as { code: string; message: string }
    expect(body.code).toBe('SESSION_QUERY_BUDGET_EXCEEDED')
    expect(metricsOf(host)).toMatchObject({ budgetExceeded: 1, inFlight: 0 })
    // 249 distinct words are refused by the protocol's cap before any statement runs.
    const distinct = Array.from({ length: 249 }, (_, i) => `w${i}`).join('+')
    const capped = await fetch(`${host.http!.url}/api/search?q=${distinct}`, { headers: auth })
    expect(capped.status).toBe(400)
    expect(((await capped.json()) as { code: string }).code).toBe('API_BAD_REQUEST')
    expect(metricsOf(host).requests).toBe(1)
  })

  it('dispose does not wait for a running search: the request fails, the host closes', async () => {
    host = await createHost({ root: freshRoot(), requireExisting: true, http: { token: TOKEN } })
    const served = host
    const search = fetch(`${served.http!.url}/api/search?q=${THE_249}&kind=events`, { headers: auth }).then(
      async (response) => ({ status: response.status, body: await response.text() }),
      (error: unknown) => ({ error }),
    )
    expect(await turnsUntil(() => metricsOf(served).inFlight === 1)).toBe(true)
    host = undefined
    await served.dispose()
    const outcome = await search
    // The socket was closed under the request: never a 200 computed after shutdown began.
    expect('error' in outcome ? 'closed' : outcome.status).toBe('closed')
  })

  it('a host without http keeps the statements inline; queryWorker turns the worker on or off explicitly', async () => {
    /** Runs one search to its end, turn by turn, and tells whether it was ever posted to a worker. */
    const postedToWorker = async (h: Host): Promise<boolean> => {
      let settled = false
      let posted = false
      const search = h.query.searchSessions!({ text: 'heron' }).finally(() => {
        settled = true
      })
      await turnsUntil(() => {
        posted ||= metricsOf(h).inFlight > 0
        return settled
      })
      expect((await search).hits.length).toBeGreaterThan(0)
      return posted
    }
    host = await createHost({ root: freshRoot(), requireExisting: true, queryWorker: true })
    expect(await postedToWorker(host)).toBe(true)
    await host.dispose()
    host = await createHost({ root: freshRoot(), requireExisting: true })
    expect(await postedToWorker(host)).toBe(false)
    await host.dispose()
    host = await createHost({ root: freshRoot(), requireExisting: true, queryWorker: false, http: { token: TOKEN } })
    expect(await postedToWorker(host)).toBe(false)
  })
})

describe('createHost: query options are checked', () => {
  it.each([[{ ms: 0 }], [{ ms: 1.5 }], [{ ms: 100, rows: -1 }]])('refuses queryBudget %j with HOST_INVALID_OPTIONS', async (budget) => {
    const { dir, cleanup } = tempDir('dsh-worker-')
    onTestFinished(cleanup)
    const error = await createHost({ root: join(dir, 'r'), queryBudget: budget }).catch((e) => e)
    expect(isDshError(error, 'HOST_INVALID_OPTIONS')).toBe(true)
  })

  it('refuses queryWorker with postgres (the PostgreSQL backend has no SQLite index)', async () => {
    const error = await createHost({ postgres: { connectionString: 'postgres://127.0.0.1:1/none' }, queryWorker: true }).catch((e) => e)
    expect(isDshError(error, 'HOST_INVALID_OPTIONS')).toBe(true)
    expect((error as Error).message).toContain('`queryWorker`')
  })
})

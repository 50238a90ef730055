import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createHost } from '@dsh/host'
import { sessionListPage } from '@dsh/protocol'
import { createReaderRole, startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

// `dsh demo --store postgres://…` as a user runs it (the built CLI, real
// processes, a real throwaway PostgreSQL cluster), then verify and serve on
// the store it left.
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const run = promisify(execFile)

/** `dsh serve --json` over the store at `url`, answering with `token`. */
function spawnServe(url: string, token: string) {
  return spawn(process.execPath, [bin, 'serve', '--json'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: url, DSH_TOKEN: token },
  })
}

async function dsh(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], {
      maxBuffer: 16 * 1024 * 1024,
      env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: '', ...env },
    })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

interface Row {
  id: string
  kind: string
  mode?: string
  label?: string
  reason?: string
  activity?: string
  depth?: number
  hasChildren?: boolean
  rung: number
  tokens?: number | null
  durationMs?: number | null
  startedAt?: number | null
  endedAt?: number | null
}
interface Demo {
  root: string
  listings: { live: Row[]; coldCached: Row[]; coldUncached: Row[] }
}

let cluster: TestCluster
let url: string
let demo: Demo

beforeAll(async () => {
  cluster = await startTestCluster({ settings: { fsync: 'off' } })
  url = await cluster.createDatabase()
  const result = await dsh(['demo', '--store', url, '--json'])
  expect(result.code, result.stdout + result.stderr).toBe(0)
  demo = JSON.parse(result.stdout)
})

afterAll(async () => {
  await cluster?.stop()
})

// Usage grows while a child runs: the live listing's is left out, the cold listings' must match.
const strip = (rows: Row[]) =>
  rows.map(({ activity: _a, rung: _r, tokens: _t, durationMs: _d, startedAt: _s, endedAt: _e, ...rest }) => rest)
const usage = (rows: Row[]) => rows.map((row) => [row.tokens, row.durationMs, row.startedAt, row.endedAt])

describe('dsh demo --store', () => {
  it('prints three listings from PostgreSQL that agree apart from activity and rung', () => {
    expect(demo.root).toMatch(/^postgres/)
    expect(demo.listings.live.length).toBeGreaterThanOrEqual(6)
    expect(strip(demo.listings.coldCached)).toEqual(strip(demo.listings.live))
    expect(strip(demo.listings.coldUncached)).toEqual(strip(demo.listings.live))
    expect(usage(demo.listings.coldUncached)).toEqual(usage(demo.listings.coldCached))
  })

  it('covers fresh and forked, one-shot and continuable children, a grandchild, a crashed and a corrupt child', () => {
    const live = demo.listings.live
    const byLabel = (label: string) => live.find((r) => r.label === label)
    expect(byLabel('researcher')).toMatchObject({ kind: 'child', mode: 'continuable', activity: 'running', rung: 1 })
    expect(byLabel('reviewer')).toMatchObject({ kind: 'child', mode: 'continuable', rung: 1 })
    expect(byLabel('rollout-planner')).toMatchObject({ kind: 'child', mode: 'one-shot', hasChildren: true, rung: 1 })
    expect(byLabel('fact-checker')).toMatchObject({ depth: 2, rung: 1 })
    // Killed with SIGKILL mid-turn in another process: read cold.
    expect(byLabel('migration-runner')).toMatchObject({ activity: 'inactive', rung: 3 })
    // One byte of its stored batch flipped: its read fails typed, the catalog shows the diagnostic row.
    expect(live.filter((r) => r.kind === 'diagnostic')).toEqual([
      expect.objectContaining({ id: 'release-1.4.log-summarizer', reason: 'unavailable', rung: 3 }),
    ])
  })

  it('serves the cold listing from the checkpoint rows when they exist and from body reads without them', () => {
    const cachedRungs = Object.fromEntries(demo.listings.coldCached.map((r) => [r.label ?? r.id, r.rung]))
    expect(cachedRungs).toMatchObject({ researcher: 2, reviewer: 2, 'rollout-planner': 2, 'fact-checker': 2 })
    expect(demo.listings.coldUncached.every((r) => r.rung === 3)).toBe(true)
    expect(demo.listings.coldCached.every((r) => r.activity !== 'running')).toBe(true)
  })

  it('text output names the store without credentials; a rerun rebuilds; the environment never sends the demo into a database', async () => {
    const withPassword = new URL(url)
    withPassword.password = 'not-shown'
    // Rerunning on a database that holds only the demo's sessions rebuilds them.
    const again = await dsh(['demo', '--store', withPassword.toString()])
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain(`Store: ${demo.root}`)
    expect(again.stdout).not.toContain('not-shown')
    expect(again.stderr).toMatch(/warning: the --store URL holds a password/)
    expect(again.stdout).toContain('The three listings agree')
    expect(again.stdout).toContain('verify --store <the same URL>')
    // The SIGKILLed child's open turn is closed by load() on the store; the damaged batch is named.
    expect(again.stdout).toMatch(
      /Crash repair: release-1\.4\.migration-runner was killed mid-turn; load\(\) closed its open turn with .*"turn\/end"/,
    )
    expect(again.stdout).toMatch(
      /Corruption: one byte flipped in the batch of release-1\.4\.log-summarizer from seq \d+ \(dsh_batches\.body\)/,
    )
    // demo writes: it takes --store only, never DSH_DATABASE_URL/DSH_STORE.
    const dir = mkdtempSync(join(tmpdir(), 'dsh-store-demo-'))
    try {
      const local = await dsh(['demo', '--root', join(dir, 'root'), '--json'], { DSH_DATABASE_URL: url })
      expect(local.code, local.stderr).toBe(0)
      expect(JSON.parse(local.stdout).root).toBe(join(dir, 'root'))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuses a database holding sessions it did not make, and changes nothing', async () => {
    const other = await cluster.createDatabase()
    const host = await createHost({ postgres: { connectionString: other } })
    try {
      host.sessions.create({ id: 'someone-elses', cwd: '/work' }).append('user/message', { text: 'keep me' })
    } finally {
      await host.dispose()
    }
    const refused = await dsh(['demo', '--store', other, '--json'])
    expect(refused.code).toBe(1)
    expect(JSON.parse(refused.stdout).error.code).toBe('CLI_STORE_NOT_EMPTY')
    const listed = sessionListPage.parse(JSON.parse((await dsh(['sessions', '--store', other, '--json'])).stdout))
    expect(listed.sessions.map((s) => s.header.id)).toEqual(['someone-elses'])
  })
})

describe('dsh verify and serve on the demo store', () => {
  it('verify --store exits 1 and names the corrupt child (through DSH_DATABASE_URL too)', async () => {
    for (const [args, env] of [
      [['verify', '--store', url, '--json'], {}],
      [['verify', '--json'], { DSH_DATABASE_URL: url }],
    ] as const) {
      const result = await dsh([...args], env)
      expect(result.code, result.stderr).toBe(1)
      const report = JSON.parse(result.stdout) as { checked: number; corrupt: number; sessions: { id: string; status: string }[] }
      expect(report).toMatchObject({ checked: 7, corrupt: 1 })
      expect(report.sessions.filter((s) => s.status === 'corrupt').map((s) => s.id)).toEqual(['release-1.4.log-summarizer'])
    }
    const text = await dsh(['verify', '--store', url])
    expect(text.code).toBe(1)
    expect(text.stdout).toMatch(/1 of 7 logs failed verification: release-1\.4\.log-summarizer/)
  })

  it('serve --store answers GET /api/sessions (with the token) with the sessions `dsh sessions --store --json` prints', async () => {
    const token = 'store-serve-token-0123456789'
    const child = spawnServe(url, token)
    let err = ''
    child.stderr.setEncoding('utf8')
    child.stderr.on('data', (chunk: string) => (err += chunk))
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    try {
      const info = await new Promise<{ root: string; url: string }>((resolve, reject) => {
        let out = ''
        child.stdout.setEncoding('utf8')
        child.stdout.on('data', (chunk: string) => {
          out += chunk
          try {
            resolve(JSON.parse(out))
          } catch {
            // wait for the whole object
          }
        })
        void exited.then((code) => reject(new Error(`serve exited early (${String(code)}): ${err}`)))
      })
      expect(info.root).toBe(demo.root)
      expect((await fetch(`${info.url}/api/sessions`)).status).toBe(401)
      const get = async (path: string): Promise<unknown> => {
        const response = await fetch(`${info.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
        expect(response.status, path).toBe(200)
        return await response.json()
      }
      const cli = async (...args: string[]): Promise<unknown> => {
        const result = await dsh([...args, '--store', url, '--json'])
        expect(result.code, result.stderr).toBe(0)
        return JSON.parse(result.stdout)
      }
      const all = sessionListPage.parse(await get('/api/sessions'))
      expect(all.sessions.map((s) => s.header.id).sort()).toEqual([
        'release-1.4',
        'release-1.4.log-summarizer',
        'release-1.4.migration-runner',
        'release-1.4.planner',
        'release-1.4.planner.fact-checker',
        'release-1.4.researcher',
        'release-1.4.reviewer',
      ])
      // The same page, title, tokens and cost included (the demo deleted its checkpoint rows, so both list
      // them null; the case below lists cached values).
      const records = (body: unknown) =>
        sessionListPage.parse(body).sessions.map(({ title: _t, tokens: _n, cost: _c, ...record }) => record)
      expect(sessionListPage.parse(await cli('sessions'))).toEqual(all)
      expect(records(await cli('sessions', '--parent', 'release-1.4'))).toEqual(
        records(await get('/api/sessions?parentSession=release-1.4')),
      )
      expect(await cli('agents', 'release-1.4', '--descendants')).toEqual(
        await get('/api/sessions/release-1.4/subagents?scope=descendants'),
      )
    } finally {
      child.kill('SIGTERM')
      expect(await exited).toBe(0)
    }
  })
})

describe('dsh sessions --store: title, tokens and cost from the checkpoint table', () => {
  it('lists the cached values of a run with usage, as serve --store does; a stale row lists null', async () => {
    const db = await cluster.createDatabase()
    const host = await createHost({ postgres: { connectionString: db } })
    try {
      for (const id of ['a-run', 'b-run']) {
        const session = host.sessions.create({ id, cwd: '/work' })
        session.append('user/message', { text: `  Plan the\n release ${id} ` })
        session.append('turn/start', { turn: 1 })
        session.append('step/start', { turn: 1, step: 0, provider: 'p', model: 'm' })
        session.append('assistant/message', { turn: 1, text: 'ok' })
        session.append('step/end', { turn: 1, step: 0, usage: { input: 100, output: 20 }, finish: 'stop' })
        session.append('turn/end', { turn: 1, reason: 'completed' })
      }
      host.sessions.create({ id: 'c-uncached', cwd: '/work' })
    } finally {
      // Disposing writes the final checkpoints of the live sessions.
      await host.dispose()
    }
    const dir = mkdtempSync(join(tmpdir(), 'dsh-store-prices-'))
    try {
      const prices = join(dir, 'prices.json')
      writeFileSync(prices, JSON.stringify({ currency: 'USD', providers: { p: { m: { input: 1, output: 4 } } } }))
      const listed = await dsh(['sessions', '--store', db, '--json', '--prices', prices])
      expect(listed.code, listed.stderr).toBe(0)
      expect(listed.stderr).toBe('')
      const page = sessionListPage.parse(JSON.parse(listed.stdout))
      const values = (body: typeof page) => body.sessions.map((s) => [s.header.id, s.title, s.tokens, s.cost])
      expect(values(page).sort()).toEqual([
        ['a-run', 'Plan the release a-run', 120, expect.closeTo((100 * 1 + 20 * 4) / 1e6, 12)],
        ['b-run', 'Plan the release b-run', 120, expect.closeTo((100 * 1 + 20 * 4) / 1e6, 12)],
        ['c-uncached', null, null, null],
      ])
      const text = await dsh(['sessions', '--store', db, '--prices', prices])
      expect(text.stdout).toMatch(/a-run .* 120 +\$0\.000180 +Plan the release a-run/)

      // serve --store lists the same page (it has no price table, so cost is null there and here without one).
      const token = 'store-values-token-0123456789'
      const child = spawnServe(db, token)
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
      try {
        const info = await new Promise<{ url: string }>((resolve, reject) => {
          let out = ''
          child.stdout.setEncoding('utf8')
          child.stdout.on('data', (chunk: string) => {
            out += chunk
            try {
              resolve(JSON.parse(out))
            } catch {
              // wait for the whole object
            }
          })
          void exited.then((code) => reject(new Error(`serve exited early (${String(code)})`)))
        })
        const response = await fetch(`${info.url}/api/sessions`, { headers: { authorization: `Bearer ${token}` } })
        expect(response.status).toBe(200)
        const served = sessionListPage.parse(await response.json())
        const unpriced = await dsh(['sessions', '--store', db, '--json'])
        expect(sessionListPage.parse(JSON.parse(unpriced.stdout))).toEqual(served)
        expect(served.sessions.filter((s) => s.tokens === 120 && s.title !== null)).toHaveLength(2)
      } finally {
        child.kill('SIGTERM')
        expect(await exited).toBe(0)
      }

      // A row of another lifecycle (its identity differs from the header's) lists null, never its values.
      const { default: pg } = await import('pg')
      const pool = new pg.Pool({ connectionString: db, max: 1 })
      try {
        await pool.query(
          "UPDATE dsh_projection_checkpoints SET identity = identity || 'x'::bytea WHERE session_id = convert_to('a-run', 'UTF8')",
        )
      } finally {
        await pool.end()
      }
      const stale = sessionListPage.parse(JSON.parse((await dsh(['sessions', '--store', db, '--json'])).stdout))
      expect(values(stale).sort()).toEqual([
        ['a-run', null, null, null],
        ['b-run', 'Plan the release b-run', 120, null],
        ['c-uncached', null, null, null],
      ])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('read commands on a store, as a role that may only SELECT', () => {
  it('answer as the owner does and write nothing: search reads the text the index lacks from the logs, over MCP too', async () => {
    const db = await cluster.createDatabase()
    const host = await createHost({ postgres: { connectionString: db } })
    try {
      for (const id of ['kestrel-run', 'osprey-run']) {
        const session = host.sessions.create({ id, cwd: '/work' })
        session.append('user/message', { text: `Survey the ${id} nesting sites` })
        session.append('turn/start', { turn: 1 })
        session.append('assistant/message', { turn: 1, text: 'Nesting sites surveyed.' })
        session.append('turn/end', { turn: 1, reason: 'completed' })
      }
    } finally {
      await host.dispose()
    }
    const { default: pg } = await import('pg')
    const pool = new pg.Pool({ connectionString: db, max: 1 })
    const derived = async () =>
      (
        await pool.query(
          `SELECT (SELECT count(*)::int FROM dsh_event_text) AS text, (SELECT count(*)::int FROM dsh_search_progress) AS progress,
                  (SELECT count(*)::int FROM dsh_search_cursor) AS cursors,
                  (SELECT count(*)::int FROM dsh_projection_checkpoints) AS checkpoints`,
        )
      ).rows[0]
    try {
      const json = async (url: string, ...args: string[]) => {
        const result = await dsh([...args, '--store', url, '--json'])
        expect(result.code, result.stderr).toBe(0)
        expect(result.stderr).toBe('')
        return JSON.parse(result.stdout)
      }
      const owner = {
        sessions: await json(db, 'sessions'),
        show: await json(db, 'show', 'kestrel-run'),
        agents: await json(db, 'agents', 'kestrel-run'),
        stats: await json(db, 'stats', 'kestrel-run'),
        search: await json(db, 'search', 'nesting'),
        events: await json(db, 'search', 'nesting', '--events'),
      }
      expect(owner.search.hits).toHaveLength(2)
      // No host has indexed the text (as after a writer that stopped before it could): no rows, no stored cursor.
      await pool.query('DELETE FROM dsh_event_text')
      await pool.query('DELETE FROM dsh_search_progress')
      await pool.query('DELETE FROM dsh_search_cursor')
      const before = await derived()
      expect(before).toMatchObject({ text: 0, progress: 0, cursors: 0 })
      const reader = await createReaderRole(db)
      expect(await json(reader, 'sessions')).toEqual(owner.sessions)
      expect(await json(reader, 'show', 'kestrel-run')).toEqual(owner.show)
      expect(await json(reader, 'agents', 'kestrel-run')).toEqual(owner.agents)
      expect(await json(reader, 'stats', 'kestrel-run')).toEqual(owner.stats)
      expect(await json(reader, 'search', 'nesting')).toEqual(owner.search)
      expect(await json(reader, 'search', 'nesting', '--events')).toEqual(owner.events)
      const verified = await dsh(['verify', '--store', reader])
      expect(verified.code, verified.stderr).toBe(0)

      const {
        DSH_API_KEY: _a,
        OPENAI_API_KEY: _b,
        DSH_STORE: _c,
        DSH_DATABASE_URL: _d,
        ...inherited
      } = process.env as Record<string, string>
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [bin, 'mcp', '--store', reader],
        env: inherited,
        stderr: 'pipe',
      })
      let stderr = ''
      transport.stderr!.on('data', (part: Buffer) => {
        stderr += part.toString()
      })
      const client = new Client({ name: 'store-reader', version: '1.0.0' })
      await client.connect(transport)
      try {
        const call = async (name: string, args: Record<string, unknown>) => {
          const result = await client.callTool({ name, arguments: args })
          expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
          return result.structuredContent
        }
        expect(await call('search', { text: 'nesting' })).toEqual(owner.search)
        expect(await call('list_agents', { id: 'kestrel-run' })).toEqual(owner.agents)
        expect(await call('show_session', { id: 'osprey-run' })).toEqual(await json(db, 'show', 'osprey-run'))
      } finally {
        await client.close()
      }
      expect(stderr).toBe('')
      expect(await derived()).toEqual(before)
    } finally {
      await pool.end()
    }
  })
})

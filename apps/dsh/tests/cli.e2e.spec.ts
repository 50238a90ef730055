import { execFile, spawn } from 'node:child_process'
import { appendFileSync, chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { createHost, derivedPaths } from '@dsh/host'
import { historyPage, searchPage, sessionListPage, subagentList } from '@dsh/protocol'
import { SessionId } from '@dsh/session'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { snapshot } from './support/index-root.js'

// Runs the built CLI as a user would (turbo builds it before tests).
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const run = promisify(execFile)

async function dsh(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { maxBuffer: 16 * 1024 * 1024 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

interface Row {
  id: string
  parentId?: string
  depth?: number
  kind: string
  mode?: string
  label?: string
  reason?: string
  activity?: string
  rung: number
  tokens?: number | null
  durationMs?: number | null
  startedAt?: number | null
  endedAt?: number | null
}

let dir: string
let root: string
let demo: { root: string; listings: { live: Row[]; coldCached: Row[]; coldUncached: Row[] } }

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-cli-'))
  root = join(dir, 'demo-root')
  const result = await dsh('demo', '--json', '--root', root)
  expect(result.code, result.stderr).toBe(0)
  demo = JSON.parse(result.stdout)
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('dsh demo', () => {
  it('prints three listings that agree apart from activity and rung', () => {
    expect(demo.root).toBe(root)
    // Usage grows while a child runs: the live listing's is left out, the cold listings' must match.
    const strip = (rows: Row[]) =>
      rows.map(({ activity: _a, rung: _r, tokens: _t, durationMs: _d, startedAt: _s, endedAt: _e, ...rest }) => rest)
    const usage = (rows: Row[]) => rows.map((row) => [row.tokens, row.durationMs, row.startedAt, row.endedAt])
    expect(demo.listings.live.length).toBeGreaterThanOrEqual(6)
    expect(strip(demo.listings.coldCached)).toEqual(strip(demo.listings.live))
    expect(strip(demo.listings.coldUncached)).toEqual(strip(demo.listings.live))
    expect(usage(demo.listings.coldUncached)).toEqual(usage(demo.listings.coldCached))
  })

  it('covers fresh and forked, one-shot and continuable children, a grandchild, a crashed and a corrupt child', () => {
    const live = demo.listings.live
    const byLabel = (label: string) => live.find((r) => r.label === label)
    expect(byLabel('researcher')).toMatchObject({ kind: 'child', mode: 'continuable', activity: 'running', rung: 1 })
    expect(byLabel('rollout-planner')).toMatchObject({ kind: 'child', mode: 'one-shot', hasChildren: true, rung: 1 })
    expect(byLabel('fact-checker')).toMatchObject({ depth: 2, rung: 1 })
    expect(byLabel('migration-runner')).toMatchObject({ activity: 'inactive', rung: 3 })
    expect(live.filter((r) => r.kind === 'diagnostic')).toEqual([expect.objectContaining({ reason: 'unavailable', rung: 3 })])
  })

  it('serves the cold listing from the cache when it exists (forked, seeded child included) and from body reads without it', () => {
    const cachedRungs = Object.fromEntries(demo.listings.coldCached.map((r) => [r.label ?? r.id, r.rung]))
    expect(cachedRungs).toMatchObject({ researcher: 2, reviewer: 2, 'rollout-planner': 2, 'fact-checker': 2 })
    expect(demo.listings.coldUncached.every((r) => r.rung === 3)).toBe(true)
    expect(demo.listings.coldCached.every((r) => r.activity !== 'running')).toBe(true)
  })

  it('a rerun on its own root replaces only its own sessions: another session refuses it with nothing changed, other files stay', async () => {
    const copy = join(dir, 'rerun')
    cpSync(root, copy, { recursive: true })
    writeFileSync(join(copy, 'notes.txt'), 'mine\n')
    // A session of the user's own, as the tour's 'dsh run … --root .dsh-demo' adds one.
    const host = await createHost({ root: copy })
    try {
      const mine = host.sessions.create({ id: 'my-session', cwd: dir })
      mine.append('user/message', { text: 'keep me' })
      await host.sessions.flush(mine)
    } finally {
      await host.dispose()
    }
    // Session logs and the user's files; the derived index and cache (.dsh/) may be caught up.
    const kept = (name: string) => !name.startsWith('.dsh/')
    const before = snapshot(copy, kept)
    const refused = await dsh('demo', '--root', copy, '--json')
    expect(refused.code, refused.stderr).toBe(1)
    expect(JSON.parse(refused.stdout).error).toMatchObject({
      code: 'CLI_STORE_NOT_EMPTY',
      message: expect.stringContaining("'my-session'"),
    })
    expect(snapshot(copy, kept)).toEqual(before)
    const shown = await dsh('show', 'my-session', '--root', copy, '--json')
    expect(shown.code, shown.stderr).toBe(0)
    expect(historyPage.parse(JSON.parse(shown.stdout)).events.map((e) => e.data)).toEqual([{ text: 'keep me' }])

    // Once the user's session is gone, the rerun rebuilds the demo's own sessions and leaves the other file alone.
    const cleaner = await createHost({ root: copy })
    try {
      await cleaner.persistence.delete(SessionId('my-session'))
    } finally {
      await cleaner.dispose()
    }
    const again = await dsh('demo', '--root', copy, '--json')
    expect(again.code, again.stderr).toBe(0)
    const rerun = JSON.parse(again.stdout) as typeof demo
    expect(rerun.listings.live.map((r) => r.id).sort()).toEqual(demo.listings.live.map((r) => r.id).sort())
    expect(readFileSync(join(copy, 'notes.txt'), 'utf8')).toBe('mine\n')
    const listed = sessionListPage.parse(JSON.parse((await dsh('sessions', '--root', copy, '--json')).stdout))
    expect(listed.sessions.map((s) => s.header.id).sort()).toEqual(
      sessionListPage
        .parse(JSON.parse((await dsh('sessions', '--root', root, '--json')).stdout))
        .sessions.map((s) => s.header.id)
        .sort(),
    )
  })

  it('refuses to wipe a non-empty directory it did not make', async () => {
    const result = await dsh('demo', '--root', dir, '--json')
    expect(result.code).toBe(1)
    expect(JSON.parse(result.stdout).error.code).toBe('CLI_ROOT_INVALID')
    expect(existsSync(root)).toBe(true)
  })
})

describe('dsh on the demo root', () => {
  it('verify exits non-zero and names the corrupted session', async () => {
    const result = await dsh('verify', '--root', root, '--json')
    expect(result.code).toBe(1)
    const report = JSON.parse(result.stdout)
    const corruptId = demo.listings.live.find((r) => r.kind === 'diagnostic')!.id
    expect(report.corrupt).toBe(1)
    expect(report.sessions.filter((s: { status: string }) => s.status === 'corrupt').map((s: { id: string }) => s.id)).toEqual([corruptId])
    const text = await dsh('verify', '--root', root)
    expect(text.code).toBe(1)
    expect(text.stdout).toContain(corruptId)
  })

  it('verify reports a torn tail as torn (exit 0) and a log with a damaged header as corrupt', async () => {
    const copy = join(dir, 'verify-copy')
    cpSync(root, copy, { recursive: true })
    const logOf = (id: string) => join(copy, id.replaceAll('.', '_2e'), 'log.jsonl.zst')
    // A torn tail: the start of a zstd frame that never completed.
    appendFileSync(logOf('release-1.4.researcher'), Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x40]))
    // The demo's corrupt child, removed behind dsh's back: the index still lists it, so verify names the missing log.
    rmSync(logOf('release-1.4.log-summarizer'))
    const missing = await dsh('verify', '--root', copy, '--json')
    expect(missing.code).toBe(1)
    expect(JSON.parse(missing.stdout).sessions.find((s: { id: string }) => s.id === 'release-1.4.log-summarizer')).toMatchObject({
      status: 'error',
      code: 'SESSION_PERSISTENCE_NOT_FOUND',
    })
    // A rebuilt index no longer lists it; reindex says so, and verify still names the directory without a log.
    const reindexed = await dsh('reindex', '--root', copy, '--json')
    expect(reindexed.code, reindexed.stderr).toBe(0)
    expect(JSON.parse(reindexed.stdout)).toMatchObject({ missing: 1, missingLogs: [{ id: 'release-1.4.log-summarizer' }] })
    const still = await dsh('verify', '--root', copy, '--json')
    expect(still.code).toBe(1)
    expect(JSON.parse(still.stdout).sessions.find((s: { id: string }) => s.id === 'release-1.4.log-summarizer')).toMatchObject({
      status: 'error',
      code: 'SESSION_PERSISTENCE_NOT_FOUND',
      message: expect.stringMatching(/^The session directory .* holds no log/),
    })
    // The directory removed as well: the session is gone, nothing is missing.
    rmSync(dirname(logOf('release-1.4.log-summarizer')), { recursive: true })
    const torn = JSON.parse((await dsh('verify', '--root', copy, '--json')).stdout)
    expect(torn).toMatchObject({ torn: 1, corrupt: 0, errors: 0 })
    expect(torn.sessions.find((s: { id: string }) => s.id === 'release-1.4.researcher')).toMatchObject({ status: 'torn', tornBytes: 6 })
    expect((await dsh('verify', '--root', copy)).code).toBe(0)
    // A flipped byte in a header frame: listing leaves it out, verify names it.
    const reviewer = logOf('release-1.4.reviewer')
    const bytes = readFileSync(reviewer)
    bytes[6] = bytes[6]! ^ 0xff
    writeFileSync(reviewer, bytes)
    const damaged = await dsh('verify', '--root', copy, '--json')
    expect(damaged.code).toBe(1)
    const report = JSON.parse(damaged.stdout)
    expect(report.sessions.filter((s: { status: string }) => s.status === 'corrupt').map((s: { id: string }) => s.id)).toEqual([
      'release-1.4.reviewer',
    ])
    // A byte flipped behind dsh's back is no change in the feed, so the index still lists the
    // session; without an index, a read-only listing reads headers and leaves the damaged one out.
    for (const file of Object.values(derivedPaths(copy))) for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true })
    const listed = JSON.parse((await dsh('sessions', '--root', copy, '--json')).stdout)
    expect(listed.sessions.map((r: { header: { id: string } }) => r.header.id)).not.toContain('release-1.4.reviewer')
  })

  it('verify without a query index names a session directory whose log was removed (exit 1) and writes nothing; reindex reports it instead of dropping it', async () => {
    const copy = join(dir, 'verify-no-index')
    cpSync(root, copy, { recursive: true })
    rmSync(join(copy, '.dsh'), { recursive: true, force: true })
    // The demo's corrupt child, removed behind dsh's back: every other log is sound.
    const gone = join(copy, 'release-1_2e4_2elog-summarizer')
    rmSync(join(gone, 'log.jsonl.zst'))
    const before = snapshot(copy)
    const json = await dsh('verify', '--root', copy, '--json')
    expect(json.code, json.stderr).toBe(1)
    const report = JSON.parse(json.stdout)
    expect(report).toMatchObject({ checked: 7, ok: 6, errors: 1, corrupt: 0 })
    expect(report.sessions.find((s: { id: string }) => s.id === 'release-1.4.log-summarizer')).toEqual({
      id: 'release-1.4.log-summarizer',
      status: 'error',
      code: 'SESSION_PERSISTENCE_NOT_FOUND',
      message: expect.stringContaining(`The session directory ${gone} holds no log (log.jsonl.zst)`),
    })
    const text = await dsh('verify', '--root', copy)
    expect(text.code).toBe(1)
    expect(text.stdout).toContain('1 of 7 logs failed verification: release-1.4.log-summarizer')
    expect(snapshot(copy)).toEqual(before)

    const reindexed = await dsh('reindex', '--root', copy)
    expect(reindexed.code, reindexed.stderr).toBe(0)
    expect(reindexed.stdout).toMatch(/ 1 without a log, in \d+ ms\.$/m)
    expect(reindexed.stderr).toMatch(
      /^dsh: warning: session release-1\.4\.log-summarizer is not indexed: The session directory .* holds no log/m,
    )
    expect((await dsh('verify', '--root', copy)).code).toBe(1)
  })

  it('reindex --json reports counts', async () => {
    const result = await dsh('reindex', '--root', root, '--json')
    expect(result.code, result.stderr).toBe(0)
    const report = JSON.parse(result.stdout)
    expect(report).toMatchObject({ listed: 7, read: 7, corrupt: 1, failed: 0, missing: 0, missingLogs: [] })
    // Nothing is written by the progress bar when stderr is not a TTY.
    expect(result.stderr).toBe('')
  })

  it('sessions, agents, show and search answer with --json: the protocol wire bodies', async () => {
    const parent = await dsh('sessions', '--root', root, '--json')
    const page = sessionListPage.parse(JSON.parse(parent.stdout))
    expect(page.sessions).toHaveLength(7)
    const children = sessionListPage.parse(JSON.parse((await dsh('sessions', '--root', root, '--parent', 'release-1.4', '--json')).stdout))
    expect(children.sessions).toHaveLength(5)
    const agents = subagentList.parse(JSON.parse((await dsh('agents', 'release-1.4', '--root', root, '--json')).stdout))
    expect(agents).toMatchObject({ parentId: 'release-1.4', scope: 'children' })
    expect(agents.rows.map((r) => (r.kind === 'child' ? `${r.activity} ${r.mode}` : r.reason)).sort()).toEqual([
      'inactive continuable',
      'inactive continuable',
      'inactive continuable',
      'inactive one-shot',
      'unavailable',
    ])
    expect(agents.rows.every((r) => r.parentId === 'release-1.4' && r.depth === 1)).toBe(true)
    const text = await dsh('agents', 'release-1.4', '--descendants', '--root', root)
    expect(text.stdout).toMatch(/^ {2}release-1\.4\.planner\.fact-checker {2}idle {2}continuable/m)
    const shown = historyPage.parse(
      JSON.parse((await dsh('show', 'release-1.4.reviewer', '--root', root, '--json', '--limit', '3')).stdout),
    )
    expect(shown.events).toHaveLength(3)
    expect(shown.inheritedEventCount).toBeGreaterThan(0)
    const hits = searchPage.parse(JSON.parse((await dsh('search', 'skippable', '--events', '--root', root, '--json')).stdout))
    expect(hits.kind).toBe('events')
    expect(hits.hits.length).toBeGreaterThan(0)
    const sessionHits = searchPage.parse(JSON.parse((await dsh('search', 'skippable', '--root', root, '--json')).stdout))
    expect(sessionHits.kind).toBe('sessions')
  })

  it('show --limit and --before page a fork backwards into its inherited prefix; the pages join into its whole history', async () => {
    const page = async (...args: string[]) => {
      const result = await dsh('show', 'release-1.4.reviewer', '--root', root, '--json', ...args)
      expect(result.code, result.stderr).toBe(0)
      return historyPage.parse(JSON.parse(result.stdout))
    }
    const whole = await page('--limit', '1000')
    expect(whole.total).toBe(whole.events.length)
    expect(whole.inheritedEventCount).toBeGreaterThan(0)
    expect(whole.total).toBeGreaterThan(whole.inheritedEventCount + 3)
    const pages = []
    let before: number | undefined
    do {
      const next = await page('--limit', '3', ...(before === undefined ? [] : ['--before', String(before)]))
      expect(next.total).toBe(whole.total)
      expect(next.events.length).toBe(Math.min(3, before ?? whole.total))
      pages.unshift(next.events)
      before = next.nextBefore
    } while (before !== undefined)
    expect(pages.length).toBe(Math.ceil(whole.total / 3))
    expect(pages.flat()).toEqual(whole.events)
    const text = await dsh('show', 'release-1.4.reviewer', '--root', root, '--limit', '2')
    expect(text.stdout).toContain(`${whole.total} events, ${whole.inheritedEventCount} inherited`)
    expect(text.stdout).toContain(`earlier events: --before ${whole.total - 2}`)
  })

  it('reports typed errors: unknown command, missing root, bad option value', async () => {
    expect((await dsh('bogus')).code).toBe(2)
    const missing = await dsh('sessions', '--root', join(dir, 'nope'), '--json')
    expect(missing.code).toBe(1)
    expect(JSON.parse(missing.stdout).error.code).toBe('CLI_ROOT_INVALID')
    expect(existsSync(join(dir, 'nope'))).toBe(false)
    const bad = await dsh('sessions', '--root', root, '--limit', 'ten', '--json')
    expect(JSON.parse(bad.stdout).error.code).toBe('CLI_USAGE')
    const notFound = await dsh('show', 'no-such-session', '--root', root, '--json')
    expect(JSON.parse(notFound.stdout).error.code).toBe('SESSION_QUERY_NOT_FOUND')
  })
})

interface Serving {
  readonly info: { url: string; pageUrl: string }
  stderr(): string
  stop(): Promise<number | null>
}

/** Starts `dsh serve --json` as a real process and waits for the URL it prints. */
async function startServe(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Serving> {
  const child = spawn(process.execPath, [bin, 'serve', '--root', root, '--json', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DSH_TOKEN: '', ...env },
  })
  let out = ''
  let err = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk: string) => (err += chunk))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const info = await new Promise<{ url: string; pageUrl: string }>((resolve, reject) => {
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
  return {
    info,
    stderr: () => err,
    stop: async () => {
      child.kill('SIGTERM')
      return await exited
    },
  }
}

describe('dsh serve', () => {
  const token = 'cli-test-token-0123456789'

  it('answers each read request with the very body `dsh … --json` prints for it (one wire shape, two producers)', async () => {
    const serving = await startServe([], { DSH_TOKEN: token })
    try {
      const get = async (path: string): Promise<unknown> => {
        const response = await fetch(`${serving.info.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
        expect(response.status, path).toBe(200)
        return await response.json()
      }
      const cli = async (...args: string[]): Promise<unknown> => {
        const result = await dsh(...args, '--root', root, '--json')
        expect(result.code, result.stderr).toBe(0)
        return JSON.parse(result.stdout)
      }
      const pairs: [string, string[]][] = [
        ['/api/sessions?limit=3', ['sessions', '--limit', '3']],
        ['/api/sessions?parentSession=release-1.4', ['sessions', '--parent', 'release-1.4']],
        ['/api/sessions/release-1.4/history?limit=4', ['show', 'release-1.4', '--limit', '4']],
        ['/api/sessions/release-1.4/subagents', ['agents', 'release-1.4']],
        ['/api/sessions/release-1.4/subagents?scope=descendants', ['agents', 'release-1.4', '--descendants']],
        ['/api/search?q=skippable', ['search', 'skippable']],
        ['/api/search?q=skippable&kind=events', ['search', 'skippable', '--events']],
      ]
      for (const [path, args] of pairs) expect(await cli(...args), path).toEqual(await get(path))
      // Not vacuous: the pages hold data, and a limited listing continues.
      expect(await get('/api/sessions?limit=3')).toMatchObject({ sessions: [{}, {}, {}], nextCursor: expect.any(String) })
      expect(((await get('/api/sessions/release-1.4/subagents?scope=descendants')) as { rows: unknown[] }).rows.length).toBeGreaterThan(5)
    } finally {
      expect(await serving.stop()).toBe(0)
    }
  })

  it('serves the API on loopback with the token from DSH_TOKEN and stops cleanly on SIGTERM', async () => {
    const serving = await startServe([], { DSH_TOKEN: token })
    try {
      const { info } = serving
      expect(new URL(info.url).hostname).toBe('127.0.0.1')
      expect((await fetch(`${info.url}/api/sessions`)).status).toBe(401)
      const ok = await fetch(`${info.url}/api/sessions?parentSession=release-1.4`, { headers: { authorization: `Bearer ${token}` } })
      expect(ok.status).toBe(200)
      const body = (await ok.json()) as { sessions: unknown[] }
      expect(body.sessions).toHaveLength(5)
      const page = await fetch(info.pageUrl)
      expect(page.status).toBe(200)
      expect(await page.text()).toContain('<html')
      expect(serving.stderr()).toBe('')
    } finally {
      expect(await serving.stop()).toBe(0)
    }
  })

  it('takes the token from a 0600 --token-file; --token works but warns that ps shows it; a readable root is warned about', async () => {
    const file = join(dir, 'token')
    writeFileSync(file, `${token}\n`, { mode: 0o600 })
    const fromFile = await startServe(['--token-file', file])
    try {
      const ok = await fetch(`${fromFile.info.url}/api/sessions`, { headers: { authorization: `Bearer ${token}` } })
      expect(ok.status).toBe(200)
      expect(fromFile.stderr()).toBe('')
    } finally {
      expect(await fromFile.stop()).toBe(0)
    }
    chmodSync(root, 0o755)
    const fromFlag = await startServe(['--token', token])
    try {
      const ok = await fetch(`${fromFlag.info.url}/api/sessions`, { headers: { authorization: `Bearer ${token}` } })
      expect(ok.status).toBe(200)
      expect(fromFlag.stderr()).toMatch(/warning: --token is visible to every local user/)
      expect(fromFlag.stderr()).toMatch(/warning: the session root .* is readable by other users \(mode 755\)/)
    } finally {
      chmodSync(root, 0o700)
      expect(await fromFlag.stop()).toBe(0)
    }
  })
})

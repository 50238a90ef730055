import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { cpSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { writeSearchCorpus } from '@dsh/host/testing'
import { tempDir } from '@dsh/test-kit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

// One expensive search must not stall a real `dsh serve` process, and SIGTERM
// must not wait for it. `serve` runs the index's request-serving statements in
// a worker thread. The test holds a search open for as long as it needs, on
// any machine: it freezes that one thread by attaching strace to it and
// stopping strace, so the thread halts at its next system call (the rest of
// the process is not traced). Verdicts are orderings of events — the search
// cannot be answered while its thread is frozen, a stylesheet is answered
// meanwhile, the search is answered after the thaw — never times.

const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const TOKEN = 'serve-search-token-0123456789'
const auth = { authorization: `Bearer ${TOKEN}` }
const THE_249 = Array.from({ length: 249 }, () => 'the').join('+')
/** Every event holds "the": the search steps through SESSIONS × EVENTS candidate rows. */
const SESSIONS = 60
const EVENTS = 2_500

let corpus: string
const cleanups: Array<() => void> = []

beforeAll(async () => {
  // The freeze needs strace (setup installs it); the test fails, never skips, without it.
  execFileSync('strace', ['-V'])
  const { dir, cleanup } = tempDir('dsh-serve-corpus-')
  cleanups.push(cleanup)
  corpus = join(dir, 'root')
  await writeSearchCorpus(corpus, { sessions: SESSIONS, events: EVENTS })
})

afterAll(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

interface Serving {
  readonly pid: number
  readonly url: string
  readonly exited: Promise<number | null>
  stderr(): string
  kill(signal: NodeJS.Signals): void
}

/** `dsh serve --json` over a fresh copy of the corpus, as a real process; resolves once it printed its URL. */
async function serve(): Promise<Serving> {
  const { dir, cleanup } = tempDir('dsh-serve-')
  cleanups.push(cleanup)
  const root = join(dir, 'root')
  cpSync(corpus, root, { recursive: true })
  const child = spawn(process.execPath, [bin, 'serve', '--root', root, '--json'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DSH_TOKEN: TOKEN },
  })
  let out = ''
  let err = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk: string) => {
    err += chunk
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      out += chunk
      try {
        resolve((JSON.parse(out) as { url: string }).url)
      } catch {
        // wait for the whole object
      }
    })
    void exited.then((code) => reject(new Error(`serve exited early (${String(code)}): ${err}`)))
  })
  return { pid: child.pid!, url, exited, stderr: () => err, kill: (signal) => child.kill(signal) }
}

/** The threads of process `pid`: id and scheduler state (`t`: stopped by a tracer), from /proc. */
function threadsOf(pid: number): Map<number, string> {
  const threads = new Map<number, string>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
    threads.set(Number(tid), stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]!)
  }
  return threads
}

/**
 * The index's worker thread: the one thread the first request-serving
 * statement starts (a one-row listing; nothing before it runs a statement
 * outside the main thread). No new thread means the statements run on the
 * main thread, where a search would stall every request.
 */
async function workerThread(serving: Serving): Promise<number> {
  const before = threadsOf(serving.pid)
  const listing = await fetch(`${serving.url}/api/sessions?limit=1`, { headers: auth })
  expect(listing.status).toBe(200)
  await listing.text()
  const started = [...threadsOf(serving.pid).keys()].filter((tid) => !before.has(tid))
  expect(started, 'threads the first statement started').toHaveLength(1)
  return started[0]!
}

/** Yields to the event loop (a 1 ms timer) until `done()` holds; bounded by a count of turns, not by time. */
async function turnsUntil(done: () => boolean, maxTurns = 100_000): Promise<boolean> {
  for (let i = 0; i < maxTurns && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 1))
  return done()
}

interface Freeze {
  /** The frozen thread. */
  readonly tid: number
  /** Lets the thread run again and detaches strace. */
  thaw(): Promise<void>
}

/**
 * Freezes thread `tid` at its next system call: strace attaches to that one
 * thread (resolved once strace reports the attach), then strace itself is
 * stopped, so the thread waits for a tracer that does not answer.
 */
async function freeze(tid: number): Promise<Freeze> {
  const tracer: ChildProcess = spawn('strace', ['-p', String(tid), '-o', '/dev/null'], { stdio: ['ignore', 'ignore', 'pipe'] })
  const gone = new Promise<void>((resolve) => tracer.once('exit', () => resolve()))
  await new Promise<void>((resolve, reject) => {
    let said = ''
    tracer.stderr!.setEncoding('utf8')
    tracer.stderr!.on('data', (chunk: string) => {
      said += chunk
      if (said.includes('attached')) resolve()
    })
    void gone.then(() => reject(new Error(`strace could not attach to thread ${tid}: ${said}`)))
  })
  tracer.kill('SIGSTOP')
  return {
    tid,
    async thaw() {
      tracer.kill('SIGCONT')
      tracer.kill('SIGINT') // strace detaches and exits
      await gone
    },
  }
}

interface Answer {
  code?: string
  hits?: unknown[]
}
type Outcome = { status: number; body: Answer } | { closed: unknown }

/** Starts a search; `settled()` tells whether its answer (or the closed socket) has arrived. */
function startSearch(url: string, query: string): { outcome: Promise<Outcome>; settled(): boolean } {
  let done = false
  const outcome = fetch(`${url}/api/search?${query}`, { headers: auth })
    .then(async (response): Promise<Outcome> => ({ status: response.status, body: (await response.json()) as Answer }))
    .catch((error: unknown): Outcome => ({ closed: error }))
    .finally(() => {
      done = true
    })
  return { outcome, settled: () => done }
}

async function getCss(url: string): Promise<number> {
  const css = await fetch(`${url}/app.css`)
  await css.text()
  return css.status
}

describe('dsh serve under an expensive search', () => {
  it('answers GET /app.css while a "the"×249 search is held in the index worker, and the search after it; 249 distinct words are a typed 400', async () => {
    const serving = await serve()
    let frozen: Freeze | undefined
    try {
      const worker = await workerThread(serving)
      frozen = await freeze(worker)
      const search = startSearch(serving.url, `q=${THE_249}`)
      // The search reached the worker: the thread woke for it and halted at its next system call.
      expect(await turnsUntil(() => threadsOf(serving.pid).get(worker) === 't' || search.settled())).toBe(true)
      expect(await getCss(serving.url)).toBe(200)
      // The stylesheet was answered while the search could not be: its statement is on the frozen thread.
      expect(search.settled()).toBe(false)
      await frozen.thaw()
      frozen = undefined
      const outcome = await search.outcome
      expect('closed' in outcome).toBe(false)
      if (!('closed' in outcome)) {
        if (outcome.status === 200) expect(outcome.body.hits!.length).toBeGreaterThan(0)
        else expect({ status: outcome.status, code: outcome.body.code }).toEqual({ status: 503, code: 'SESSION_QUERY_BUDGET_EXCEEDED' })
      }
      const distinct = Array.from({ length: 249 }, (_, i) => `w${i}`).join('+')
      const capped = await fetch(`${serving.url}/api/search?q=${distinct}`, { headers: auth })
      expect(capped.status).toBe(400)
      expect(((await capped.json()) as { code: string }).code).toBe('API_BAD_REQUEST')
    } finally {
      await frozen?.thaw()
      serving.kill('SIGTERM')
      expect(await serving.exited).toBe(0)
    }
    expect(serving.stderr()).toBe('')
  })

  it('on SIGTERM closes a search held in the worker without waiting for its statement, then exits 0', async () => {
    const serving = await serve()
    let frozen: Freeze | undefined
    try {
      frozen = await freeze(await workerThread(serving))
      const worker = frozen.tid
      const search = startSearch(serving.url, `q=${THE_249}&kind=events`)
      expect(await turnsUntil(() => threadsOf(serving.pid).get(worker) === 't' || search.settled())).toBe(true)
      expect(search.settled()).toBe(false)
      serving.kill('SIGTERM')
      // The search's statement cannot finish while its thread is frozen: had shutdown waited for it, nothing would settle.
      const outcome = await search.outcome
      expect('closed' in outcome ? 'closed' : outcome.status).toBe('closed')
      await frozen.thaw()
      frozen = undefined
      expect(await serving.exited).toBe(0)
    } finally {
      await frozen?.thaw()
      serving.kill('SIGKILL') // only a failed test leaves it running
    }
    expect(serving.stderr()).toBe('')
  })
})

// serve-search: one expensive search must not stall the HTTP host.
// A real `dsh serve` process over a root of 200,000 events that all hold
// "the"; the query is `the` repeated 249 times (one distinct term). Baseline:
// how long that search takes. Subject: the slowest unauthenticated
// GET /app.css issued one after another while the same search runs. Ratio
// subject/baseline, target <= 0.25: a request waits a fraction of a search,
// never the search (with the statements on the event loop, the ratio is ~1).
// An absolute figure (every app.css under 100 ms) is reported in `extra`.
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeSearchCorpus } from '@dsh/host/testing'
import { type BenchDefinition, benchRoot, median, time } from '../harness.js'

const bin = join(benchRoot, '..', 'apps', 'dsh', 'dist', 'bin.cjs')
const TOKEN = 'bench-serve-search-token-0123456789'
const SESSIONS = 80
const EVENTS = 2_500
const SEARCH = `/api/search?q=${Array.from({ length: 249 }, () => 'the').join('+')}`

let dir: string | undefined
let child: ChildProcess | undefined
let url = ''
const slowest: number[] = []
const answered: number[] = []

async function search(): Promise<void> {
  const response = await fetch(`${url}${SEARCH}`, { headers: { authorization: `Bearer ${TOKEN}` } })
  await response.text()
  if (response.status !== 200 && response.status !== 503) throw new Error(`search answered ${response.status}`)
}

async function css(): Promise<void> {
  const response = await fetch(`${url}/app.css`)
  await response.text()
  if (response.status !== 200) throw new Error(`GET /app.css answered ${response.status}`)
}

/** The slowest GET /app.css while one search runs (ms); records how many were answered meanwhile. */
async function slowestCssDuringSearch(): Promise<number> {
  let running = true
  const searched = search().finally(() => {
    running = false
  })
  let worst = 0
  let count = 0
  while (running) {
    worst = Math.max(worst, await time(css))
    count++
  }
  await searched
  slowest.push(worst)
  answered.push(count)
  return worst
}

const definition: BenchDefinition = {
  name: 'serve-search',
  unit: 'ms',
  target: 0.25,
  compare: 'le',
  repeats: 7,
  async setup() {
    if (!existsSync(bin)) throw new Error(`${bin} is missing; build the CLI first (turbo run build --filter=@dsh/cli...).`)
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-serve-search-'))
    const root = join(dir, 'root')
    await writeSearchCorpus(root, { sessions: SESSIONS, events: EVENTS })
    const serving = spawn(process.execPath, [bin, 'serve', '--root', root, '--json'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, DSH_TOKEN: TOKEN },
    })
    child = serving
    url = await new Promise<string>((resolve, reject) => {
      let out = ''
      serving.stdout!.setEncoding('utf8')
      serving.stdout!.on('data', (chunk: string) => {
        out += chunk
        try {
          resolve((JSON.parse(out) as { url: string }).url)
        } catch {
          // wait for the whole object
        }
      })
      serving.once('exit', (code) => reject(new Error(`dsh serve exited early (${String(code)})`)))
    })
  },
  async teardown() {
    const serving = child
    if (serving !== undefined && serving.exitCode === null) {
      const exited = new Promise((resolve) => serving.once('exit', resolve))
      serving.kill('SIGTERM')
      await exited
    }
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  },
  baseline: { label: 'one "the"x249 search', run: () => time(search) },
  subject: { label: 'slowest GET /app.css during that search', run: slowestCssDuringSearch },
  extra: () => {
    // The harness's untimed warm-up ran first; its figures are left out.
    const timed = slowest.slice(1)
    return {
      events: SESSIONS * EVENTS,
      slowestCssMsMedian: median(timed),
      slowestCssMsMax: Math.max(...timed),
      cssUnder100ms: Math.max(...timed) < 100,
      cssAnsweredPerSearchMedian: median(answered.slice(1)),
    }
  },
}

export default definition

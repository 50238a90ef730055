import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Logger } from '@dsh/context'
import { createHost, type Host } from '@dsh/host'
import type { SubagentListRowBody } from '@dsh/protocol'
import { wireSubagentRow } from '@dsh/protocol/bodies'
import { SessionId } from '@dsh/session'
import { createScriptedDriver, type SubagentHandle } from '@dsh/subagent'
import { CliError } from '../errors.js'
import { fileDemoPlace } from './file-place.js'
import { DEMO_IDS } from './ids.js'
import type { DemoPlace } from './place.js'
import { demoScript } from './scripts.js'

/**
 * One catalog row as the demo prints it (`dsh demo --json`): the protocol's
 * catalog row (`SubagentListRowBody`: the entry, `parentId`, `depth` and the
 * ladder `rung`), as `GET /api/sessions/:id/subagents` and `dsh agents --json` answer it.
 */
export type DemoRow = SubagentListRowBody

export interface DemoResult {
  /** The root directory, or the store's server and database (no credentials). */
  readonly root: string
  readonly parent: string
  readonly listings: { readonly live: DemoRow[]; readonly coldCached: DemoRow[]; readonly coldUncached: DemoRow[] }
  /** True when the three listings agree apart from activity (and rung). */
  readonly agree: boolean
  /** What `load` repaired on the crashed child (turn/end interrupted), read after the listings. */
  readonly crashRepair: { readonly id: string; readonly repaired: boolean; readonly lastEvent: unknown }
  /** Where one byte of the corrupt child was flipped: its log file, or its stored batch. */
  readonly corruptedLog: string
}

export interface DemoOptions {
  /** A local session root (new, empty, or one the demo made and that holds only its sessions, which it replaces) … */
  readonly root?: string
  /** … or a PostgreSQL store (refused unless it holds only the demo's sessions), with its printable location. */
  readonly store?: { readonly connectionString: string; readonly location: string }
  readonly log?: (line: string) => void
  /** Where the demo's hosts warn (the CLI: one escaped line each on stderr). The corrupt child is meant to draw warnings. */
  readonly logger?: Logger
}

/**
 * The main job: builds a session root with a parent, fresh and forked,
 * one-shot and continuable children, a grandchild, a child killed mid-turn (a
 * real SIGKILLed process) and a child whose log is then corrupted; lists the
 * catalog live, restarts cold with the cache, deletes the cache and lists
 * again.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  // pg loads only for a store.
  const place =
    options.store === undefined
      ? fileDemoPlace(options.root ?? '.dsh-demo', options.logger)
      : (await import('./store-place.js')).storeDemoPlace(options.store.connectionString, options.store.location, options.logger)
  try {
    return await runScenario(place, options.log ?? (() => {}), options.logger)
  } finally {
    await place.close()
  }
}

async function runScenario(place: DemoPlace, log: (line: string) => void, logger: Logger | undefined): Promise<DemoResult> {
  const withDemoHost = <T>(hold: Promise<void>, run: (host: Host) => Promise<T>): Promise<T> => withHost(place, logger, hold, run)
  await place.prepare()

  log('phase 0: a separate runtime writes the parent and two children, then is killed with SIGKILL mid-turn')
  await runCrashWorker(place)
  await place.afterCrash()
  const corruptedLog = await place.corrupt(DEMO_IDS.corrupt)
  log(`         flipped one byte inside a committed batch of ${DEMO_IDS.corrupt}`)

  log('phase 1: restart, resume the parent, spawn live children (fresh, fork, one-shot, continuable, a grandchild)')
  let release!: () => void
  const hold = new Promise<void>((r) => (release = r))
  const live = await withDemoHost(hold, async (host) => {
    const loaded = await host.persistence.load(SessionId(DEMO_IDS.parent))
    const parent = host.sessions.restore(loaded)
    parent.append('user/message', { text: 'Now research the format, review the plan, and plan the rollout.' })
    parent.append('turn/start', { turn: 2 })
    const handles: SubagentHandle[] = [
      host.subagents.spawn(parent, {
        id: DEMO_IDS.researcher,
        mode: 'continuable',
        label: 'researcher',
        context: 'fresh',
        prompt: 'How do zstd skippable frames work?',
      }),
      host.subagents.spawn(parent, {
        id: DEMO_IDS.reviewer,
        mode: 'continuable',
        label: 'reviewer',
        context: 'fork',
        prompt: 'Review the plan so far.',
      }),
      host.subagents.spawn(parent, {
        id: DEMO_IDS.planner,
        mode: 'one-shot',
        label: 'rollout-planner',
        context: 'fresh',
        prompt: 'Plan the rollout.',
      }),
    ]
    const planner = handles[2]!
    handles.push(
      host.subagents.spawn(planner.session, {
        id: DEMO_IDS.factChecker,
        mode: 'continuable',
        label: 'fact-checker',
        context: 'fresh',
        prompt: 'Check the plan’s claims.',
      }),
    )
    await waitFor(() => handles.every((h) => h.session.events.some((e) => e.type === 'assistant/message')))
    const rows = await explain(host)
    log('         listed live; letting the children finish')
    release()
    await Promise.all(handles.map((h) => h.done))
    parent.append('assistant/message', { turn: 2, text: 'All subagents reported back.' })
    parent.append('turn/end', { turn: 2, reason: 'completed' })
    await host.sessions.dispose(parent.id)
    return rows
  })

  log('phase 2: restart cold, with the checkpoint cache')
  const coldCached = await withDemoHost(hold, explain)

  log('phase 3: delete the checkpoint cache and restart cold')
  await place.dropCache()
  const coldUncached = await withDemoHost(hold, explain)

  const crashRepair = await withDemoHost(hold, async (host) => {
    const loaded = await host.persistence.load(SessionId(DEMO_IDS.crashed))
    return { id: DEMO_IDS.crashed, repaired: loaded.repaired, lastEvent: loaded.events.at(-1) ?? null }
  })

  const listings = { live, coldCached, coldUncached }
  return { root: place.location, parent: DEMO_IDS.parent, listings, agree: agree(listings), crashRepair, corruptedLog }
}

async function withHost<T>(place: DemoPlace, logger: Logger | undefined, hold: Promise<void>, run: (host: Host) => Promise<T>): Promise<T> {
  const host = await createHost({
    ...place.hostOptions(),
    ...(logger === undefined ? {} : { logger }),
    driver: createScriptedDriver(demoScript(hold)),
  })
  try {
    return await run(host)
  } finally {
    await host.dispose()
  }
}

async function explain(host: Host): Promise<DemoRow[]> {
  return (await host.subagents.explainDescendants(DEMO_IDS.parent)).map(wireSubagentRow)
}

/**
 * The listings agree when every row matches apart from activity and the rung
 * that served it; the live listing's usage is left out too (tokens,
 * duration and span grow while a child runs), but the two cold listings' must match.
 */
function agree(listings: DemoResult['listings']): boolean {
  const key = (rows: DemoRow[], usage: boolean): string =>
    JSON.stringify(
      rows.map((row) => ({
        ...row,
        activity: undefined,
        rung: undefined,
        ...(usage ? {} : { tokens: undefined, durationMs: undefined, startedAt: undefined, endedAt: undefined }),
      })),
    )
  return (
    key(listings.live, false) === key(listings.coldCached, false) && key(listings.coldCached, true) === key(listings.coldUncached, true)
  )
}

function runCrashWorker(place: DemoPlace): Promise<void> {
  const worker = join(dirname(fileURLToPath(import.meta.url)), 'crash-worker.js')
  const { args, env } = place.worker()
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [worker, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } })
    let out = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      out += chunk
      if (out.includes('READY\n')) child.kill('SIGKILL')
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL' && out.includes('READY\n')) resolvePromise()
      else reject(new CliError('CLI_DEMO_FAILED', `The demo's crash worker exited early (code ${String(code)}, signal ${String(signal)}).`))
    })
  })
}

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('The demo timed out waiting for its children to start.')
    await new Promise((r) => setTimeout(r, 2))
  }
}

import { spawn } from 'node:child_process'
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createHost, derivedPaths, type Host } from '@dsh/host'
import type { SubagentListRowBody } from '@dsh/protocol'
import { wireSubagentRow } from '@dsh/protocol/bodies'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, TRAILER_MAGIC } from '@dsh/session-persistence-jsonl'
import { createScriptedDriver, type SubagentHandle } from '@dsh/subagent'
import { CliError } from '../errors.js'
import { DEMO_IDS } from './ids.js'
import { demoScript } from './scripts.js'

/**
 * One catalog row as the demo prints it (`dsh demo --json`): the protocol's
 * catalog row (`SubagentListRowBody`: the entry, `parentId`, `depth` and the
 * ladder `rung`), as `GET /api/sessions/:id/subagents` and `dsh agents --json` answer it.
 */
export type DemoRow = SubagentListRowBody

export interface DemoResult {
  readonly root: string
  readonly parent: string
  readonly listings: { readonly live: DemoRow[]; readonly coldCached: DemoRow[]; readonly coldUncached: DemoRow[] }
  /** True when the three listings agree apart from activity (and rung). */
  readonly agree: boolean
  /** What `load` repaired on the crashed child (turn/end interrupted), read after the listings. */
  readonly crashRepair: { readonly id: string; readonly repaired: boolean; readonly lastEvent: unknown }
  /** The corrupted child's log, as `dsh verify` will name it. */
  readonly corruptedLog: string
}

const MARKER = '.dsh-demo-root'

export interface DemoOptions {
  readonly root: string
  readonly log?: (line: string) => void
}

/**
 * The main job: builds a session root with a parent, fresh and forked,
 * one-shot and continuable children, a grandchild, a child killed mid-turn (a
 * real SIGKILLed process) and a child whose log is then corrupted; lists the
 * catalog live, restarts cold with the cache, deletes the cache and lists
 * again.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const root = resolve(options.root)
  const log = options.log ?? (() => {})
  prepareRoot(root)

  log('phase 0: a separate runtime writes the parent and two children, then is killed with SIGKILL mid-turn')
  await runCrashWorker(root)
  const corruptedLog = corruptCommittedBatch(root, DEMO_IDS.corrupt)
  log(`         flipped one byte inside a committed batch of ${DEMO_IDS.corrupt}`)

  log('phase 1: restart, resume the parent, spawn live children (fresh, fork, one-shot, continuable, a grandchild)')
  let release!: () => void
  const hold = new Promise<void>((r) => (release = r))
  const live = await withDemoHost(root, hold, async (host) => {
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
  const coldCached = await withDemoHost(root, hold, explain)

  log('phase 3: delete the cache file and restart cold')
  const cache = derivedPaths(root).projectionCache
  for (const file of [cache, `${cache}-wal`, `${cache}-shm`]) rmSync(file, { force: true })
  const coldUncached = await withDemoHost(root, hold, explain)

  const crashRepair = await withDemoHost(root, hold, async (host) => {
    const loaded = await host.persistence.load(SessionId(DEMO_IDS.crashed))
    return { id: DEMO_IDS.crashed, repaired: loaded.repaired, lastEvent: loaded.events.at(-1) ?? null }
  })

  const listings = { live, coldCached, coldUncached }
  return { root, parent: DEMO_IDS.parent, listings, agree: agree(listings), crashRepair, corruptedLog }
}

async function withDemoHost<T>(root: string, hold: Promise<void>, run: (host: Host) => Promise<T>): Promise<T> {
  const host = await createHost({ root, driver: createScriptedDriver(demoScript(hold)) })
  try {
    return await run(host)
  } finally {
    await host.dispose()
  }
}

async function explain(host: Host): Promise<DemoRow[]> {
  return (await host.subagents.explainDescendants(DEMO_IDS.parent)).map(wireSubagentRow)
}

/** The listings agree when every row matches apart from activity and the rung that served it. */
function agree(listings: DemoResult['listings']): boolean {
  const key = (rows: DemoRow[]): string => JSON.stringify(rows.map((row) => ({ ...row, activity: undefined, rung: undefined })))
  return key(listings.live) === key(listings.coldCached) && key(listings.live) === key(listings.coldUncached)
}

/** A demo root is wiped only when it is one the demo made; anything else non-empty is refused. */
function prepareRoot(root: string): void {
  let isDirectory: boolean | undefined
  try {
    isDirectory = statSync(root).isDirectory()
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOTDIR') throw new CliError('CLI_ROOT_INVALID', `${root} lies under a file; pass --root with a new directory.`)
    if (code !== 'ENOENT') throw error
  }
  if (isDirectory === false) throw new CliError('CLI_ROOT_INVALID', `${root} is a file, not a directory; pass --root with a new directory.`)
  if (isDirectory === true) {
    const entries = readdirSync(root)
    if (entries.length > 0 && !entries.includes(MARKER)) {
      throw new CliError('CLI_ROOT_INVALID', `${root} is not empty and was not made by 'dsh demo'; pass --root with a new directory.`)
    }
    rmSync(root, { recursive: true, force: true })
  }
  mkdirSync(root, { recursive: true, mode: 0o700 })
  writeFileSync(join(root, MARKER), 'made by dsh demo; the demo wipes and rebuilds this directory\n', { mode: 0o600 })
}

function runCrashWorker(root: string): Promise<void> {
  const worker = join(dirname(fileURLToPath(import.meta.url)), 'crash-worker.js')
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [worker, root], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      out += chunk
      if (out.includes('READY\n')) child.kill('SIGKILL')
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL' && out.includes('READY\n')) resolvePromise()
      else reject(new Error(`The demo's crash worker exited early (code ${String(code)}, signal ${String(signal)}).`))
    })
  })
}

/** Flips one byte inside the last committed data frame of `id`'s log (a real byte flip, as a disk would). */
function corruptCommittedBatch(root: string, id: string): string {
  const persistence = createJsonlPersistence({ root, readOnly: true })
  const file = persistence.logPath(id)
  void persistence.close()
  const fd = openSync(file, 'r+')
  try {
    const bytes = Buffer.alloc(fstatSync(fd).size)
    readSync(fd, bytes, 0, bytes.length, 0)
    // Each batch is a data frame followed by its skippable trailer frame; the
    // last trailer starts at the last occurrence of the trailer magic, so a
    // few bytes before it lie inside the committed data frame it vouches for.
    const magic = Buffer.alloc(4)
    magic.writeUInt32LE(TRAILER_MAGIC)
    const trailerStart = bytes.lastIndexOf(magic)
    if (trailerStart < 16) throw new Error(`The demo could not find a committed batch in ${file}.`)
    const at = trailerStart - 6
    const byte = Buffer.from([bytes[at]! ^ 0x5a])
    writeSync(fd, byte, 0, 1, at)
  } finally {
    closeSync(fd)
  }
  return file
}

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('The demo timed out waiting for its children to start.')
    await new Promise((r) => setTimeout(r, 2))
  }
}

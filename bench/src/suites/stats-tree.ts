// stats-tree: usage of a session and its whole subagent tree
// (`subagents.treeSnapshots(parent, ['sessionStats'], { descendants: true })`,
// what `dsh stats --descendants` sums) for a parent with 200 cold children of
// 256 KiB each. Baseline: the warm checkpoint cache (rung 2 for every
// session). Subject: the same call with the cache absent (rung 3: one
// body-bearing observation + fold per session). Ratio = subject / baseline,
// target >= 20; requirement: 0 body reads on the warm side, counted from the
// persistence metrics.
//
// The fixture (a zstd JSONL root with its index and projection cache, written
// through a host so the cache holds `sessionStats` checkpoints) is built once
// under bench/.fixtures; delete that directory to regenerate it.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createHost, type Host } from '@dsh/host'
import type { SessionPersistence } from '@dsh/session-persistence'
import { type TreeSnapshotEntry, treeSnapshots } from '@dsh/subagent'
import { quietLogger } from '../fixtures/children.js'
import { type BenchDefinition, benchRoot, time } from '../harness.js'

const CHILDREN = 200
const CHUNKS = 64
const CHUNK_BYTES = 4 * 1024
const FIXTURE_VERSION = 1
const PARENT = 'stats-parent'
const KEYS = ['sessionStats'] as const
const fixturesDir = join(benchRoot, '.fixtures')
const fixture = join(fixturesDir, `stats-tree-v${FIXTURE_VERSION}`)
const root = join(fixture, 'root')
const marker = join(fixture, 'ready.json')

function words(seed: number): string {
  let state = seed >>> 0 || 1
  let text = ''
  while (text.length < CHUNK_BYTES) {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    text += `${((state >>> 0) % 100_000).toString(36)} `
  }
  return text.slice(0, CHUNK_BYTES)
}

async function generate(): Promise<void> {
  rmSync(fixture, { recursive: true, force: true })
  mkdirSync(root, { recursive: true })
  writeFileSync(join(fixturesDir, '.gitignore'), '*\n')
  console.log(`  stats-tree: generating ${CHILDREN} children × ${(CHUNKS * CHUNK_BYTES) / 1024} KiB under ${fixture} (once) …`)
  const host = await createHost({ root, logger: quietLogger })
  const parent = host.sessions.create({ id: PARENT as never })
  parent.append('user/message', { text: 'Delegate the survey.' })
  parent.append('turn/start', { turn: 1 })
  parent.append('assistant/message', { turn: 1, text: 'Delegated.', usage: { input: 900, output: 40 }, provider: 'bench', model: 'm' })
  parent.append('turn/end', { turn: 1, reason: 'completed' })
  for (let i = 0; i < CHILDREN; i++) {
    const child = host.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
    child.append('user/message', { text: `Survey part ${i}.` })
    child.append('turn/start', { turn: 1 })
    for (let index = 0; index < CHUNKS; index++) child.append('assistant/chunk', { turn: 1, index, delta: words(i * CHUNKS + index + 1) })
    child.append('tool/call', { turn: 1, callId: `c${i}`, name: 'read_file', arguments: { path: `part-${i}.md` } })
    child.append('tool/result', { turn: 1, callId: `c${i}`, content: 'ok' })
    child.append('assistant/message', {
      turn: 1,
      text: `Part ${i} surveyed.`,
      usage: { input: 1000 + i, output: 200, cacheRead: 300, reasoning: 50 },
      provider: 'bench',
      model: 'm',
    })
    child.append('turn/end', { turn: 1, reason: 'completed' })
    await host.sessions.dispose(child.id)
  }
  await host.dispose()
  writeFileSync(marker, `${JSON.stringify({ version: FIXTURE_VERSION, children: CHILDREN })}\n`)
}

let host: Host | undefined
let expected = ''
const bodyReadsPerCall: { warm: number[]; absent: number[] } = { warm: [], absent: [] }

function bodyReads(): number {
  const p = host!.persistence as SessionPersistence & { backend?: SessionPersistence }
  return (p.backend ?? p).metrics.bodyReads
}

/** Values only (the rung differs by side): what a rollup sums. */
const values = (entries: readonly TreeSnapshotEntry[]) => JSON.stringify(entries.map((e) => [e.id, e.status, e.snapshot?.sessionStats]))

async function measured(side: 'warm' | 'absent'): Promise<number> {
  const h = host!
  const services = {
    sessions: h.sessions,
    sessionProjections: h.projections,
    sessionQuery: h.query,
    sessionProjectionCache: side === 'warm' ? h.cache : undefined,
  }
  const before = bodyReads()
  let entries: TreeSnapshotEntry[] = []
  const ms = await time(async () => {
    entries = await treeSnapshots(services, PARENT, KEYS, { descendants: true })
  })
  bodyReadsPerCall[side].push(bodyReads() - before)
  if (entries.length !== CHILDREN + 1 || values(entries) !== expected)
    throw new Error(`stats-tree: the ${side} side returned other values than expected`)
  if (side === 'warm' && !entries.every((entry) => entry.rung === 2))
    throw new Error('stats-tree: the warm side was not served by the cache')
  return ms
}

const definition: BenchDefinition = {
  name: 'stats-tree',
  unit: 'ms',
  target: 20,
  compare: 'ge',
  ratio: 'subject/baseline',
  repeats: 5,
  async setup() {
    const ready = existsSync(marker) && (JSON.parse(readFileSync(marker, 'utf8')) as { version?: number }).version === FIXTURE_VERSION
    if (!ready) await generate()
    host = await createHost({ root, readOnly: true, logger: quietLogger })
    if (host.cache === undefined) throw new Error('stats-tree: the fixture has no projection cache; delete it to regenerate it.')
    const reference = await host.subagents.treeSnapshots(PARENT, KEYS, { descendants: true })
    if (!reference.every((entry) => entry.rung === 2 && entry.status === 'ok'))
      throw new Error(`stats-tree: the checkpoint cache does not serve every session; delete ${fixture} to regenerate it.`)
    expected = values(reference)
  },
  async teardown() {
    await host?.dispose()
    host = undefined
  },
  baseline: { label: 'warm checkpoint cache (rung 2, no body read)', run: () => measured('warm') },
  subject: { label: 'cache absent (rung 3: one 256 KiB observation + fold per session)', run: () => measured('absent') },
  extra() {
    return {
      sessions: CHILDREN + 1,
      transcriptPlaintextBytesPerChild: CHUNKS * CHUNK_BYTES,
      bodyReadsPerCall,
      ratioDefinition: 'cache-absent median / warm-cache median',
    }
  },
  requirements() {
    return {
      warmSideMakesNoBodyRead: bodyReadsPerCall.warm.length > 0 && bodyReadsPerCall.warm.every((n) => n === 0),
      absentSideReadsEachSessionOnce: bodyReadsPerCall.absent.every((n) => n === CHILDREN + 1),
    }
  },
}

export default definition

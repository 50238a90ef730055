// list-children: `subagents.listChildren` for 1,000 cold children with 1 MiB
// transcripts, warm checkpoint cache (rung 2) against the cache unmounted
// (rung 3: one body-bearing observation + fold per child). Ratio = rung 3 / cached (subject / baseline); target ≥ 20×.
//
// The fixture (a zstd JSONL root with its SQLite query index and projection
// cache, ~1 GiB of plaintext) is generated once under bench/.fixtures and
// reused; delete that directory to regenerate it.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Context } from '@dsh/context'
import { Session, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { type SqliteProjectionCache, sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { sessionQueryPlugin } from '@dsh/session-query'
import { defaultIndexPath, sqliteSessionQueryPlugin } from '@dsh/session-query-sqlite'
import { type SubagentDriver, subagentsPlugin } from '@dsh/subagent'
import { ChildListings, PARENT, quietLogger, spawnFamily } from '../fixtures/children.js'
import { type BenchDefinition, benchRoot } from '../harness.js'

const CHILDREN = 1_000
const TRANSCRIPT_BYTES = 1024 * 1024
const CHUNK_BYTES = 4 * 1024
const CHUNKS = TRANSCRIPT_BYTES / CHUNK_BYTES
const FIXTURE_VERSION = 1
const fixturesDir = join(benchRoot, '.fixtures')
const fixture = join(fixturesDir, `list-children-v${FIXTURE_VERSION}`)
const root = join(fixture, 'root')
const marker = join(fixture, 'ready.json')

/** Deterministic word soup: compresses like prose (zstd ~3×), unlike a repeated string. */
function wordSource(seed: number): () => string {
  const vocabulary =
    'the of and to in is that for it as with was on be by this are from at or an have not which but all were can when there their has more if will one would about into than its only some time out so them these also may what other could first then any after new used such how two where most through each same while'.split(
      ' ',
    )
  let state = seed >>> 0 || 1
  return () => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    return vocabulary[(state >>> 0) % vocabulary.length]!
  }
}

function chunkText(next: () => string): string {
  let text = ''
  while (text.length < CHUNK_BYTES) text += `${next()} `
  return text.slice(0, CHUNK_BYTES)
}

/**
 * Appends a whole streamed turn at once: 256 chunks of 4 KiB (1 MiB of
 * plaintext; chunks are not full-text indexed, the short final message is).
 */
function bulkDriver(): SubagentDriver {
  let seed = 1
  return {
    name: 'bench',
    async run({ session, turn }) {
      const next = wordSource(seed++)
      session.append('turn/start', { turn })
      for (let index = 0; index < CHUNKS; index++) session.append('assistant/chunk', { turn, index, delta: chunkText(next) })
      session.append('assistant/message', { turn, text: 'Summary: the requested work is done.' })
      session.append('turn/end', { turn, reason: 'completed' })
      return { reason: 'completed' }
    },
  }
}

async function generate(): Promise<void> {
  rmSync(fixture, { recursive: true, force: true })
  mkdirSync(root, { recursive: true })
  // Fixtures are machine-local and large: keep them out of git without touching the repository's ignore file.
  writeFileSync(join(fixturesDir, '.gitignore'), '*\n')
  console.log(`  list-children: generating ${CHILDREN} children × ${TRANSCRIPT_BYTES / 1024} KiB under ${fixture} (once) …`)
  const ctx = new Context({ logger: quietLogger })
  let clock = 1_750_000_000_000
  await ctx.activate(sessionStorePlugin({ clock: () => clock++ }))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionPersistencePlugin(createJsonlPersistence({ root })))
  await ctx.activate(sessionProjectionCachePlugin({ root }))
  // subagentsPlugin requires a query corpus; generation never lists, so the in-memory one will do.
  await ctx.activate(sessionQueryPlugin())
  await ctx.activate(subagentsPlugin({ driver: bulkDriver() }))
  // Four runs at a time keeps memory bounded (each live child holds its 1 MiB until it goes cold).
  await spawnFamily(ctx, { children: CHILDREN, batch: 4, label: 'list-children' })
  await ctx.dispose()
  writeFileSync(marker, `${JSON.stringify({ version: FIXTURE_VERSION, children: CHILDREN, transcriptBytes: TRANSCRIPT_BYTES })}\n`)
}

function duSync(path: string): number {
  let total = 0
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const full = join(path, entry.name)
    total += entry.isDirectory() ? duSync(full) : statSync(full).size
  }
  return total
}

let ctx: Context | undefined
const listings = new ChildListings('list-children', CHILDREN, () => ctx)

async function servedByCache(): Promise<boolean> {
  const explained = await ctx!.require('subagents').explainChildren(PARENT)
  return explained.length === CHILDREN && explained.every((entry) => entry.rung === 2)
}

async function rewarmCache(): Promise<void> {
  console.log('  list-children: the fixture cache is stale (older cache schema); re-warming it from the logs …')
  const query = ctx!.require('sessionQuery')
  const projections = ctx!.require('sessionProjections')
  const cache = ctx!.require('sessionProjectionCache') as SqliteProjectionCache
  for (const record of (await query.listSessions({ parentSession: PARENT })).records) {
    const observation = await query.observeSession(record.header.id)
    const session = new Session({
      header: observation.header,
      events: observation.events,
      inheritedEventCount: observation.inheritedEventCount,
    })
    if (!cache.writeColdRows(session, projections.checkpoint(session)))
      throw new Error(`list-children: re-warming the cache failed for ${record.header.id}`)
  }
}

const definition: BenchDefinition = {
  name: 'list-children',
  unit: 'ms',
  target: 20,
  compare: 'ge',
  ratio: 'subject/baseline',
  repeats: 5,
  async setup() {
    const ready = existsSync(marker) && (JSON.parse(readFileSync(marker, 'utf8')) as { version?: number }).version === FIXTURE_VERSION
    if (!ready) await generate()
    ctx = new Context({ logger: quietLogger })
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionProjectionsPlugin())
    await ctx.activate(sessionPersistencePlugin(createJsonlPersistence({ root })))
    // The index is part of the fixture: after its first build, opening it reads headers only.
    await ctx.activate(sqliteSessionQueryPlugin({ path: defaultIndexPath(root) }))
    await ctx.activate(sessionProjectionCachePlugin({ root }))
    await ctx.activate(subagentsPlugin({ driver: bulkDriver() }))
    // The warm side must really be warm: a cache file from an older cache
    // schema is rebuilt empty on open, which would silently compare rung 3
    // with rung 3. Re-warm it from the logs (the rows going cold writes), then
    // insist that rung 2 serves every child.
    if (!(await servedByCache())) {
      await rewarmCache()
      if (!(await servedByCache()))
        throw new Error('list-children: the warm checkpoint cache does not serve every child; delete the fixture to regenerate it.')
    }
    await listings.expectWarm(`; delete ${fixture} to regenerate it.`)
  },
  async teardown() {
    await ctx?.dispose()
    ctx = undefined
  },
  baseline: {
    label: 'warm checkpoint cache (rung 2)',
    run: () => listings.cached(),
  },
  subject: {
    label: 'cache unmounted (rung 3: one 1 MiB observation + fold per child)',
    run: () => listings.rung3(),
  },
  extra() {
    return {
      children: CHILDREN,
      seededChildren: CHILDREN / 2,
      transcriptPlaintextBytesPerChild: TRANSCRIPT_BYTES,
      fixtureBytesOnDisk: duSync(root),
      bodyReadsPerListing: listings.bodyReadsPerListing,
      ratioDefinition: 'rung 3 median / warm-cache median',
    }
  },
}

export default definition

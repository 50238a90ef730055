import { errorBody, historyPage, sessionStatsReport, streamEvent, subagentList } from '@dsh/protocol'
import { SessionId } from '@dsh/session'
import { appendUserMessage } from '@dsh/session-persistence'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pngBytes } from './support/png.js'
import { SseReader } from './support/sse.js'
import { type Stack, startStack, TOKEN, turn, withQuery } from './support/stack.js'

// Every per-session route that answers a session's events or projections
// refuses a subagent's id as the history route does, and serves the same data
// through the parent; over real HTTP on the disk stack (zstd JSONL, SQLite
// index and projection cache).

let stack: Stack
let digest = ''
/** The session ids the routes read data of (history, tree snapshots, attachment bytes), in order. */
const reads: string[] = []
const png = pngBytes(4, 4, [0, 0, 200])
/** Text only the children's events hold: no refusal may carry it. */
const SECRETS = ['cold child words', 'live child words', 'working on', 'finished']

beforeAll(async () => {
  stack = await startStack({
    backend: 'disk',
    wrap: (services) => ({
      ...withQuery(services, (query) => ({
        readHistory: (id, request, signal) => {
          reads.push(id)
          return query.readHistory(id, request, signal)
        },
      })),
      subagents: {
        explainChildren: (id, signal) => services.subagents.explainChildren(id, signal),
        explainDescendants: (id, signal) => services.subagents.explainDescendants(id, signal),
        treeSnapshots: (...args) => {
          reads.push(args[0])
          return services.subagents.treeSnapshots!(...args)
        },
      },
      sessionPersistence: {
        readAttachment: (id: string, wanted: string, signal?: AbortSignal) => {
          reads.push(id)
          return stack.persistence.readAttachment!(SessionId(id), wanted, signal)
        },
      },
    }),
  })
  const parent = stack.sessions.create({ id: 'parent' })
  turn(parent, 'parent plan')
  const event = await appendUserMessage(stack.persistence, parent, 'parent picture', [{ bytes: png, mediaType: 'image/png' }])
  digest = (event.data.blocks as readonly { attachment?: { digest: string } }[]).find((b) => b.attachment)!.attachment!.digest
  // A cold child (its run ended, it is out of memory: owner facts from the listing) and a live one (from its live header).
  await stack.subagents.spawn(parent, { mode: 'one-shot', label: 'cold', context: 'fresh', prompt: 'cold child words', id: 'cold-child' })
    .done
  stack.gates.hold('live-child')
  const live = stack.subagents.spawn(parent, {
    mode: 'one-shot',
    label: 'live',
    context: 'fresh',
    prompt: 'live child words',
    id: 'live-child',
  })
  await appendUserMessage(stack.persistence, live.session, 'live child words', [{ bytes: png, mediaType: 'image/png' }])
  await stack.sessions.flush(parent)
})

afterAll(async () => {
  stack?.gates.release('live-child')
  await stack?.close()
})

const answer = async (path: string) => {
  const { status, body } = await stack.get(path)
  return { status, code: status === 200 ? undefined : errorBody.parse(body).code, body }
}

/** The per-session reads a subagent's id is refused on, as paths under `/api/sessions/:id`. */
const ROUTES = ['/history', '/stats', '/stats?scope=descendants', () => `/attachments/${digest}`] as const
const pathsOf = (id: string) => ROUTES.map((route) => `/api/sessions/${id}${typeof route === 'string' ? route : route()}`)

describe("a subagent's id on the per-session routes", () => {
  it("is refused with the history route's code by every route, cold or live, and the parent is served", async () => {
    reads.length = 0
    const bodyReads = stack.persistence.metrics?.bodyReads
    expect(bodyReads).toEqual(expect.any(Number))
    for (const child of ['cold-child', 'live-child']) {
      expect(stack.sessions.get(child) === undefined).toBe(child === 'cold-child')
      const history = await answer(`/api/sessions/${child}/history`)
      expect([history.status, history.code]).toEqual([403, 'API_FORBIDDEN'])
      for (const path of pathsOf(child)) {
        const refused = await answer(path)
        expect([path, refused.status, refused.code]).toEqual([path, history.status, history.code])
        expect(Object.keys(refused.body as object).sort()).toEqual(['code', 'message'])
        for (const secret of SECRETS) expect(JSON.stringify(refused.body)).not.toContain(secret)
      }
    }
    // Each refusal came from header facts, before any read of the child's data.
    expect(reads).toEqual([])
    expect(stack.persistence.metrics?.bodyReads).toBe(bodyReads)
    for (const path of pathsOf('parent')) expect([path, (await stack.get(path)).status]).toEqual([path, 200])
    expect(reads).toEqual(['parent', 'parent', 'parent', 'parent'])
  })

  it("serves the child's data through its parent: history, attachment, catalog row and the parent's tree report", async () => {
    const page = historyPage.parse((await stack.get('/api/sessions/parent/subagents/cold-child/history')).body)
    expect(JSON.stringify(page.events)).toContain('cold child words')
    const bytes = await fetch(`${stack.server.url}/api/sessions/parent/subagents/live-child/attachments/${digest}`, {
      headers: { Authorization: `Bearer ${TOKEN}` },
    })
    expect(bytes.status).toBe(200)
    expect(Buffer.from(await bytes.arrayBuffer()).equals(png)).toBe(true)
    const catalog = subagentList.parse((await stack.get('/api/sessions/parent/subagents')).body)
    expect(catalog.rows.find((row) => row.id === 'cold-child')).toMatchObject({ kind: 'child', label: 'cold', tokens: expect.any(Number) })
    // The tree report of the top-level session is the tree-wide route that lists its subagents as entries.
    const tree = sessionStatsReport.parse((await stack.get('/api/sessions/parent/stats?scope=descendants')).body)
    expect(tree.sessions.map((entry) => [entry.id, entry.subagent, entry.depth])).toEqual([
      ['parent', false, 0],
      ['cold-child', true, 1],
      ['live-child', true, 1],
    ])
    expect(tree.sessions.find((entry) => entry.id === 'cold-child')?.title).toBe('cold child words')
  })

  it("keeps a subagent's own stream to ids: its writes reach it as nothing, its children as catalog notices", async () => {
    const sub = stack.sessions.create({ id: 'streamed-sub', parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
    const own = await SseReader.open(`${stack.server.url}/api/sessions/streamed-sub/stream?token=${TOKEN}`)
    const parentStream = await SseReader.open(`${stack.server.url}/api/sessions/parent/stream?token=${TOKEN}`)
    try {
      await own.next((e) => e.event === 'ready')
      await parentStream.next((e) => e.event === 'ready')
      turn(sub, 'streamed secret words')
      // The hub has handled the child's view changes once its parent hears of them (ids only).
      await parentStream.next((e) => e.event === 'catalog' && (e.data as { childId: string }).childId === 'streamed-sub')
      await stack.subagents.spawn(sub, { mode: 'one-shot', context: 'fresh', prompt: 'grand words', id: 'streamed-grandchild' }).done
      // SSE keeps order: whatever the hub sent this stream before the grandchild's notice has arrived with it.
      await own.next((e) => e.event === 'catalog' && (e.data as { childId: string }).childId === 'streamed-grandchild')
      for (const event of own.events) expect(['ready', 'catalog', 'written']).toContain(streamEvent.parse(event).event)
      expect(JSON.stringify(own.events)).not.toMatch(/streamed secret words|grand words/)
    } finally {
      own.close()
      parentStream.close()
    }
  })
})

describe('owner re-check after the read', () => {
  it('refuses stats and attachments of a session republished (as a subagent, or under another parent) between the check and the read', async () => {
    // The reads are wrapped so that, after the route's owner check, the
    // session is deleted and republished under the same id as a subagent of
    // another session (real persistence operations).
    const swapped = new Set<string>()
    const republish = async (id: string, withPicture: boolean) => {
      if (swapped.has(id)) return
      swapped.add(id)
      await replaced.persistence.delete(SessionId(id))
      replaced.gates.hold(id)
      const run = replaced.subagents.spawn('intruder', { mode: 'one-shot', context: 'fresh', prompt: 'intruder secret', id })
      if (withPicture)
        await appendUserMessage(replaced.persistence, run.session, 'intruder secret', [{ bytes: png, mediaType: 'image/png' }])
      replaced.gates.release(id)
      await run.done
    }
    const replaced: Stack = await startStack({
      wrap: (services) => ({
        ...services,
        subagents: {
          explainChildren: (id, signal) => services.subagents.explainChildren(id, signal),
          explainDescendants: (id, signal) => services.subagents.explainDescendants(id, signal),
          treeSnapshots: async (...args) => {
            if (args[0] === 'flip-stats') await republish('flip-stats', false)
            return services.subagents.treeSnapshots!(...args)
          },
        },
        sessionPersistence: {
          readAttachment: async (id: string, wanted: string, signal?: AbortSignal) => {
            if (id === 'flip-picture' || id === 'moved-child') await republish(id, true)
            return replaced.persistence.readAttachment!(SessionId(id), wanted, signal)
          },
        },
      }),
    })
    try {
      turn(replaced.sessions.create({ id: 'intruder' }), 'other work')
      turn(replaced.sessions.create({ id: 'owner' }), 'owner work')
      for (const id of ['flip-stats', 'flip-picture']) {
        const session = replaced.sessions.create({ id })
        turn(session, 'own words')
        await appendUserMessage(replaced.persistence, session, 'own picture', [{ bytes: png, mediaType: 'image/png' }])
        await replaced.sessions.dispose(id)
      }
      await replaced.subagents.spawn('owner', { mode: 'one-shot', context: 'fresh', prompt: 'owned words', id: 'moved-child' }).done
      const stats = await replaced.get('/api/sessions/flip-stats/stats')
      const picture = await replaced.get(`/api/sessions/flip-picture/attachments/${digest}`)
      // A child republished under another parent while its bytes were read: the same 404 as a child never listed there.
      const moved = await replaced.get(`/api/sessions/owner/subagents/moved-child/attachments/${digest}`)
      expect([moved.status, errorBody.parse(moved.body).code]).toEqual([404, 'API_NOT_FOUND'])
      expect([...swapped].sort()).toEqual(['flip-picture', 'flip-stats', 'moved-child'])
      for (const { status, body } of [stats, picture]) {
        expect(status).toBe(403)
        expect(errorBody.parse(body).code).toBe('API_FORBIDDEN')
        expect(JSON.stringify(body)).not.toContain('intruder secret')
      }
      // Through its new parent the republished session is served.
      const tree = sessionStatsReport.parse((await replaced.get('/api/sessions/intruder/stats?scope=descendants')).body)
      expect(tree.sessions.find((entry) => entry.id === 'flip-stats')).toMatchObject({ subagent: true, title: 'intruder secret' })
      const through = await fetch(`${replaced.server.url}/api/sessions/intruder/subagents/flip-picture/attachments/${digest}`, {
        headers: { Authorization: `Bearer ${TOKEN}` },
      })
      expect(through.status).toBe(200)
    } finally {
      await replaced.close()
    }
  })
})

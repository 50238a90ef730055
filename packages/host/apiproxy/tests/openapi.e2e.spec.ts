import { buildTarget, type RouteName, routes } from '@dsh/protocol'
import { type OpenApiDocument, type OpenApiMediaType, openApiDocument, openApiPath } from '@dsh/protocol/openapi'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SseReader } from './support/sse.js'
import { type Stack, startStack, TOKEN, turn } from './support/stack.js'
import { extractive } from './support/summarizer.js'

// Every route of the protocol table, called over real HTTP against the real
// stack the CLI embeds (JSONL files, SQLite index with search, subagent
// runtime). Each recorded answer is validated by ajv (JSON Schema 2020-12)
// against the schema the OpenAPI document gives that route and status: the
// document a third party reads, not the zod schemas it was made from.

interface Recorded {
  readonly route: RouteName
  readonly status: number
  readonly contentType: string
  /** The JSON body, or for an event stream one message as `{ event, data }`. */
  readonly body: unknown
}

let stack: Stack
let document: OpenApiDocument
const recorded: Recorded[] = []

async function call(route: RouteName, target: string, token: string | null = TOKEN): Promise<Recorded> {
  const response = await fetch(`${stack.server.url}${target}`, {
    method: routes[route].method,
    headers: token === null ? {} : { Authorization: `Bearer ${token}` },
  })
  const entry = { route, status: response.status, contentType: response.headers.get('content-type') ?? '', body: await response.json() }
  recorded.push(entry)
  return entry
}

beforeAll(async () => {
  stack = await startStack({ backend: 'disk', summarizer: extractive })
  const parent = stack.sessions.create({ id: 'parent', cwd: '/work/project' })
  turn(parent, 'alpha bravo')
  // Long enough that a summary of its first sentence is shorter than it is.
  turn(stack.sessions.create({ id: 'other' }), `bravo charlie. ${'With more detail. '.repeat(8)}`)
  await stack.subagents.spawn(parent, { mode: 'one-shot', label: 'summarizer', context: 'fresh', prompt: 'summarize', id: 'child-a' }).done
  // A grandchild: child-b is held on its turn (live) while it delegates.
  stack.gates.hold('child-b')
  const b = stack.subagents.spawn(parent, {
    mode: 'continuable',
    label: 'researcher',
    context: 'fork',
    prompt: 'bravo research',
    id: 'child-b',
  })
  await stack.subagents.spawn(b.session, { mode: 'one-shot', context: 'fresh', prompt: 'dig deeper', id: 'grandchild' }).done
  stack.gates.release('child-b')
  await b.done
  for (const session of stack.sessions.list()) await stack.sessions.flush(session)

  const served = await call('openapi', buildTarget(routes.openapi, {}))
  expect(served.status).toBe(200)
  document = served.body as OpenApiDocument

  // One valid request (or more) per route of the table.
  await call('listSessions', buildTarget(routes.listSessions, {}, { limit: 2 }))
  await call('listSessions', buildTarget(routes.listSessions, {}, { parentSession: 'parent', origin: 'subagent' }))
  await call('history', buildTarget(routes.history, { id: 'parent' }, { limit: 3 }))
  await call('subagents', buildTarget(routes.subagents, { id: 'parent' }, { scope: 'descendants' }))
  await call('childHistory', buildTarget(routes.childHistory, { parentId: 'parent', childId: 'child-a' }, {}))
  await call('sessionStats', buildTarget(routes.sessionStats, { id: 'parent' }, { scope: 'descendants' }))
  await call('search', buildTarget(routes.search, {}, { q: 'bravo', kind: 'sessions' }))
  await call('search', buildTarget(routes.search, {}, { q: 'bravo', kind: 'events' }))
  await call('compact', buildTarget(routes.compact, { id: 'other' }, { keep: 1 }))

  // The stream: its ready message, a projection change and a catalog notice, each recorded as one message.
  const stream = await SseReader.open(`${stack.server.url}${buildTarget(routes.stream, { id: 'parent' })}`, {
    Authorization: `Bearer ${TOKEN}`,
  })
  const streamed = (message: { event: string; data: unknown }) =>
    recorded.push({ route: 'stream', status: stream.status, contentType: stream.contentType ?? '', body: message })
  streamed(await stream.next((e) => e.event === 'ready', 60_000))
  turn(parent, 'one more step')
  streamed(await stream.next((e) => e.event === 'projection', 60_000))
  await stack.subagents.spawn(parent, { mode: 'one-shot', context: 'fresh', prompt: 'late', id: 'child-c' }).done
  streamed(await stream.next((e) => e.event === 'catalog', 60_000))
  stream.close()

  // Refusals of every route: an unknown query parameter (400) and a missing token (401).
  for (const [name, route] of Object.entries(routes) as Array<[RouteName, (typeof routes)[RouteName]]>) {
    const target = route.path.replace(/:[A-Za-z]+/g, 'parent')
    await call(name, `${target}?no-such-parameter=1`)
    await call(name, target, null)
  }
  await call('history', buildTarget(routes.history, { id: 'no-such-session' }))
})

afterAll(async () => {
  await stack?.close()
})

/** The schema a route's answer must meet in the document: by exact status, else by its `4XX`/`5XX` range. */
function mediaOf(entry: Recorded): { media: OpenApiMediaType | undefined; key: string } {
  const op = document.paths[openApiPath(routes[entry.route].path)]?.[routes[entry.route].method.toLowerCase()]
  const responses = op?.responses ?? {}
  const status = String(entry.status) in responses ? String(entry.status) : `${String(entry.status).slice(0, 1)}XX`
  const mediaType = entry.contentType.split(';')[0]!.trim()
  return { media: responses[status]?.content[mediaType], key: `${entry.route} ${status} ${mediaType}` }
}

describe('the OpenAPI document over HTTP', () => {
  it('is served at GET /api/openapi.json behind the token, and is the document the protocol builds', async () => {
    expect(document).toEqual(openApiDocument())
    const anonymous = recorded.find((r) => r.route === 'openapi' && r.status === 401)
    expect(anonymous?.body).toMatchObject({ code: 'API_UNAUTHORIZED' })
    const wrong = await fetch(`${stack.server.url}/api/openapi.json?token=${TOKEN}`)
    expect(wrong.status).toBe(401)
  })

  it('every route of the table answered, and every recorded answer validates against its route and status in the document', () => {
    const answered = new Set(recorded.filter((r) => r.status === 200).map((r) => r.route))
    expect([...answered].sort()).toEqual(Object.keys(routes).sort())
    expect(answered.size).toBe(Object.keys(routes).length)
    // Each route's refusals were recorded too: 400 and 401, typed error bodies.
    for (const name of Object.keys(routes) as RouteName[]) {
      expect(
        recorded
          .filter((r) => r.route === name && r.status >= 400)
          .map((r) => r.status)
          .sort(),
      ).toEqual(name === 'history' ? [400, 401, 404] : [400, 401])
    }

    const ajv = new Ajv2020({ strict: true, allErrors: true })
    ajv.addKeyword('components')
    ajv.addSchema({ components: { schemas: document.components.schemas } }, 'openapi.json')
    let validated = 0
    for (const entry of recorded) {
      const { media, key } = mediaOf(entry)
      expect(media, key).toBeDefined()
      if (media === undefined) continue
      // An event stream's messages meet the message schema; a JSON answer its body schema.
      const schema = entry.contentType.startsWith('text/event-stream') ? media['x-dsh-message-schema'] : media.schema
      expect(schema?.$ref, key).toMatch(/^#\/components\/schemas\//)
      const validate = ajv.compile({ $ref: `openapi.json${String(schema?.$ref)}` })
      expect({ key, valid: validate(entry.body), errors: validate.errors ?? null }).toEqual({ key, valid: true, errors: null })
      validated++
    }
    expect(validated).toBe(recorded.length)
    expect(
      new Set(recorded.filter((r) => r.route === 'stream' && r.status === 200).map((r) => (r.body as { event: string }).event)),
    ).toEqual(new Set(['ready', 'projection', 'catalog']))
  })

  it('the validation is not vacuous: an answer with a field missing, or an extra one, is refused', () => {
    const ajv = new Ajv2020({ strict: true, allErrors: true })
    ajv.addKeyword('components')
    ajv.addSchema({ components: { schemas: document.components.schemas } }, 'openapi.json')
    const history = recorded.find((r) => r.route === 'history' && r.status === 200)!.body as Record<string, unknown>
    const validate = ajv.compile({ $ref: 'openapi.json#/components/schemas/HistoryPage' })
    expect(validate(history)).toBe(true)
    const { total: _, ...withoutTotal } = history
    expect(validate(withoutTotal)).toBe(false)
    expect(validate({ ...history, internal: 1 })).toBe(false)
  })
})

import { answer, type ModelServer, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'
import { cleanEnv, dshRun, dshStart, type Started } from './support/dsh-process.js'

// POST /api/sessions/:id/compact on a real `dsh serve`: with DSH_API_KEY the
// server's summaries come from the model at --base-url (a local Chat
// Completions server, the only fake); without a key the route is a typed 501;
// a session another process writes is refused with SESSION_PERSISTENCE_LOCKED.

const KEY = 'sk-e2e-0a1b2c3d4e5f'
const TOKEN = 'serve-compact-token-0123456789'
const SUMMARIZE = /^Summarize the conversation above/

let server: ModelServer | undefined
const cleanups: Array<() => void> = []
const processes: Started[] = []

afterEach(async () => {
  for (const p of processes.splice(0)) {
    p.child.kill('SIGTERM')
    await p.exited
  }
  await server?.close()
  server = undefined
  for (const cleanup of cleanups.splice(0)) cleanup()
})

const lastUser = (request: RecordedRequest) => request.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? ''
const isSummarize = (request: RecordedRequest) => SUMMARIZE.test(String(lastUser(request)))

/** A root with one session of three `dsh run` turns; its root and id. */
async function conversation(): Promise<{ root: string; id: string }> {
  const { dir, cleanup } = tempDir('dsh-serve-compact-')
  cleanups.push(cleanup)
  const root = `${dir}/root`
  const env = cleanEnv({ DSH_API_KEY: KEY })
  const first = await dshRun(['run', 'first question', '--root', root, '--base-url', server!.baseURL], env)
  expect(first.code, first.stdout + first.stderr).toBe(0)
  const id = /^session (\S+)$/m.exec(first.stdout)![1]!
  for (const prompt of ['second question', 'third question']) {
    const next = await dshRun(['run', '--resume', id, prompt, '--root', root, '--base-url', server!.baseURL], env)
    expect(next.code, next.stdout + next.stderr).toBe(0)
  }
  return { root, id }
}

/** `dsh serve --json` on `root`; resolves with its URL once it printed it. */
async function serve(root: string, withKey: boolean): Promise<string> {
  const env = cleanEnv({ DSH_TOKEN: TOKEN, ...(withKey ? { DSH_API_KEY: KEY } : {}) })
  const p = dshStart(['serve', '--root', root, '--json', '--base-url', server!.baseURL], env)
  processes.push(p)
  const url = await new Promise<string>((resolve, reject) => {
    // --json prints one JSON document on stdout (over several lines) once the server listens.
    let stdout = ''
    p.child.stdout!.on('data', (part: Buffer) => {
      stdout += part.toString()
      try {
        resolve(String((JSON.parse(stdout) as { url: string }).url))
      } catch {
        // Not all of it yet.
      }
    })
    p.child.on('exit', () => reject(new Error(`dsh serve exited: ${p.output()}`)))
  })
  return url
}

const post = async (url: string) => {
  const response = await fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}` } })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

describe('dsh serve: POST /api/sessions/:id/compact', () => {
  it('with a model key compacts through the model and the log keeps every event; without one the route is 501', async () => {
    server = await startModelServer((request) =>
      isSummarize(request) ? answer(['The user asked ', 'three questions.']) : answer(['An answer.']),
    )
    const { root, id } = await conversation()
    const plain = await serve(root, false)
    expect(await post(`${plain}/api/sessions/${id}/compact`)).toMatchObject({ status: 501, body: { code: 'API_COMPACTION_UNAVAILABLE' } })
    const first = processes.pop()!
    first.child.kill('SIGTERM')
    expect(await first.exited).toBe(0)

    const url = await serve(root, true)
    const compacted = await post(`${url}/api/sessions/${id}/compact?keep=2`)
    expect(compacted).toMatchObject({ status: 200, body: { id, shadowed: 4 } })
    expect(server.requests.filter(isSummarize)).toHaveLength(1)
    const history = await fetch(`${url}/api/sessions/${id}/history?limit=1000`, { headers: { Authorization: `Bearer ${TOKEN}` } })
    const events = ((await history.json()) as { events: Array<{ type: string }> }).events
    expect(events.filter((e) => e.type.startsWith('compaction/')).map((e) => e.type)).toEqual([
      'compaction/start',
      'compaction/summary',
      'compaction/end',
    ])
    expect(events.filter((e) => e.type === 'user/message')).toHaveLength(3)
  })

  it('a session another process is writing is refused with SESSION_PERSISTENCE_LOCKED (409)', async () => {
    // The summary of the other process's compaction is held by the model: that process keeps the session's writer lock.
    server = await startModelServer((request) => (isSummarize(request) ? { kind: 'stream', hangAfter: 0 } : answer(['An answer.'])))
    const { root, id } = await conversation()
    const holder = dshStart(['compact', id, '--root', root, '--base-url', server.baseURL], cleanEnv({ DSH_API_KEY: KEY }))
    processes.push(holder)
    await server.hung()
    const url = await serve(root, true)
    expect(await post(`${url}/api/sessions/${id}/compact`)).toMatchObject({ status: 409, body: { code: 'SESSION_PERSISTENCE_LOCKED' } })
  })
})

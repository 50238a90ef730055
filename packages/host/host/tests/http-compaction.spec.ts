import { tempDir } from '@dsh/test-kit'
import { describe, expect, it, onTestFinished } from 'vitest'
import { createHost, type Host } from '../src/index.js'

// The host's wiring of the compaction route: `createHost({ http, summarizer })`
// activates the compaction service before the HTTP API, which serves it.

const token = 'host-compaction-token-0123456789'

/** The first sentence of each shadowed message: a deterministic summarizer (model-backed ones live in driver packages). */
const firstSentences = {
  async summarize({ context }: { context: { messages: readonly { role: string }[] } }) {
    return { summary: `Summary of ${context.messages.length} messages.` }
  },
}

async function open(options: { summarizer: boolean }): Promise<Host> {
  const { dir, cleanup } = tempDir('dsh-host-compaction-')
  onTestFinished(cleanup)
  const host = await createHost({ root: dir, http: { token }, ...(options.summarizer ? { summarizer: firstSentences } : {}) })
  onTestFinished(() => host.dispose())
  const session = host.sessions.create({ id: 'talk' })
  for (let turn = 1; turn <= 3; turn++) {
    session.append('turn/start', { turn })
    session.append('user/message', { text: `Question ${turn}.` })
    session.append('assistant/message', { turn, text: `Answer ${turn}.` })
    session.append('turn/end', { turn, reason: 'completed' })
  }
  return host
}

const compact = (host: Host) =>
  fetch(`${host.http!.url}/api/sessions/talk/compact?keep=2`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } })

describe('createHost({ http, summarizer })', () => {
  it('serves POST /api/sessions/:id/compact through the host compaction service', async () => {
    const host = await open({ summarizer: true })
    const response = await compact(host)
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ id: 'talk', shadowed: 4 })
    expect(
      host.sessions
        .get('talk')!
        .events.filter((e) => e.type.startsWith('compaction/'))
        .map((e) => e.type),
    ).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
  })

  it('without a summarizer the route answers 501 API_COMPACTION_UNAVAILABLE', async () => {
    const host = await open({ summarizer: false })
    const response = await compact(host)
    expect(response.status).toBe(501)
    expect(await response.json()).toMatchObject({ code: 'API_COMPACTION_UNAVAILABLE' })
  })
})

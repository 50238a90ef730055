// A process that compacts one session of a root, printing each stage once
// it is durable, and stops for good at the stage named by argv[4] (or at
// none: '-'), waiting to be killed. Used to kill a compaction between its
// summary and its end, a point no command pauses at.
import { createModelClient, createOpenAISummarizer } from '@dsh/driver-openai'
import { createHost } from '@dsh/host'
import { SessionId } from '@dsh/session'

const [root, id, baseURL, stopAt] = process.argv.slice(2)
const client = createModelClient({ baseURL, apiKey: 'sk-worker', model: 'summarizer-1', env: {} })
const host = await createHost({
  root,
  summarizer: createOpenAISummarizer({ client }),
  compaction: {
    onProgress: async (stage) => {
      process.stdout.write(`${stage}\n`)
      // A timer keeps the process alive while it waits to be killed.
      if (stage === stopAt) await new Promise(() => setInterval(() => {}, 60_000))
    },
  },
})
const session = host.sessions.restore(await host.persistence.load(SessionId(id)))
await host.ctx.require('compaction').compact(session, { reason: 'manual', keep: 2 })
await host.dispose()

import { createHost } from '@dsh/host'

/** Makes a session root at `root` holding one persisted session `one` with a single user message. */
export async function rootWithOneSession(root: string, text: string): Promise<void> {
  const host = await createHost({ root })
  try {
    const session = host.sessions.create({ id: 'one' })
    session.append('user/message', { text })
    await host.sessions.flush(session)
  } finally {
    await host.dispose()
  }
}

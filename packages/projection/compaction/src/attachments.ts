import type { Session } from '@dsh/session'
import { attachmentResolver, type SessionPersistence } from '@dsh/session-persistence'
import type { SessionAttachments } from './types.js'

/**
 * The attachment source of a compaction over `persistence`: the bytes of a
 * session's images and files, read as a driver's step reads them (only the
 * attachments the given messages reference, each at most the store's
 * attachment cap). The bytes are read after `compaction/start` is durable,
 * so the session's log exists and a fork reads what it inherited through
 * its reference. Undefined when the backend stores no attachments.
 */
export function persistedAttachments(persistence: SessionPersistence): ((session: Session) => SessionAttachments) | undefined {
  if (persistence.readAttachment === undefined) return undefined
  return (session) => attachmentResolver(persistence, session.header.id)
}

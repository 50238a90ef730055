import { lstatSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import type { StoredAttachmentCopy } from '@dsh/session-persistence/testing'

/** Every file under a root's `<session dir>/attachments/` (temporary files included), with its size and permission bits. */
export function attachmentFiles(root: string): StoredAttachmentCopy[] {
  const out: StoredAttachmentCopy[] = []
  for (const session of readdirSync(root, { withFileTypes: true })) {
    if (!session.isDirectory()) continue
    const dir = join(root, session.name, 'attachments')
    let names: string[]
    try {
      names = readdirSync(dir)
    } catch {
      continue
    }
    for (const name of names.sort()) {
      const stats = lstatSync(join(dir, name))
      out.push({ place: join(session.name, 'attachments', name), bytes: stats.size, mode: stats.mode & 0o777 })
    }
  }
  return out
}

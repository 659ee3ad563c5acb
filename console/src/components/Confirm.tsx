// A button whose action asks first, in a modal <dialog> (focus stays in it; Escape cancels).
import { useRef, useState, type ReactNode } from "react";

export function ConfirmButton({
  label,
  question,
  onConfirm,
  danger,
  children,
}: {
  label: string;
  question: string;
  onConfirm: () => Promise<unknown> | void;
  danger?: boolean;
  children?: ReactNode;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const confirm = async () => {
    setBusy(true);
    try {
      await onConfirm();
    } finally {
      setBusy(false);
      dialog.current?.close();
    }
  };
  return (
    <>
      <button type="button" className={danger ? "danger" : undefined} onClick={() => dialog.current?.showModal()}>
        {label}
      </button>
      <dialog ref={dialog} aria-label={label}>
        <p>{question}</p>
        {children}
        <div className="row">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="button" className={danger ? "danger" : "primary"} disabled={busy} onClick={confirm}>
            {`Yes, ${label.toLowerCase()}`}
          </button>
        </div>
      </dialog>
    </>
  );
}

"""The e-mail channel: a plain-text message through the configured SMTP server."""

import smtplib
import ssl
from contextlib import suppress
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from .outcome import Outcome

TIMEOUT = 15  # seconds, for the connection and each SMTP reply


def compose(settings, subject: str, message: dict) -> EmailMessage:
    """The notice as a person reads it: the flow, what happened, a link to its page."""
    mail = EmailMessage()
    mail["Subject"] = subject
    mail["From"] = settings.notify_email_from
    mail["To"] = ", ".join(settings.notify_email_to)
    mail["Date"] = formatdate(localtime=False)
    mail["Message-ID"] = make_msgid(idstring=message["id"], domain="flow-portal")
    mail.set_content(body_text(message))
    return mail


def body_text(message: dict) -> str:
    data = message.get("data") or {}
    lines = [_what_happened(message["type"], data), ""]
    if data.get("flowId"):
        lines += [f"Reference: {data.get('referenceId') or '—'}", f"Flow: {data['flowId']}"]
    if data.get("flowUrl"):
        lines += ["", f"Open the flow: {data['flowUrl']}"]
    lines += ["", f"Notice {message['id']} at {message['timestamp']}, sent by the Flow Portal."]
    return "\n".join(lines) + "\n"


def _what_happened(event_type: str, data: dict) -> str:
    if event_type == "portal.flow.incident":
        incident = data.get("incident") or {}
        kind = " / ".join(filter(None, (incident.get("taskType"), incident.get("taskCategory")))) or "an incident"
        return f"The flow has an incident: {kind}.\nMessage: {incident.get('message') or '—'}"
    if event_type == "portal.flow.stuck":
        return (
            f"The flow has not changed for {data.get('hoursWithoutChange')} hours "
            f"(status {data.get('consentStatus') or '—'}, {data.get('lifecycle') or '—'}; "
            f"last change {data.get('lastChangeAt')}; open incidents: {data.get('openIncidents')})."
        )
    return "This is a test notice: the portal's e-mail notices reach you."


def send_mail(settings, subject: str, message: dict) -> Outcome:
    """Hand the message to the SMTP server once: a 5xx reply stops the retries, anything else is retried."""
    try:
        _hand_over(settings, compose(settings, subject, message))
    except smtplib.SMTPResponseException as error:
        return _reply_outcome(error.smtp_code, error.smtp_error)
    except smtplib.SMTPRecipientsRefused as error:
        code, reply = next(iter(error.recipients.values()))
        return _reply_outcome(code, reply)
    except TimeoutError:
        return Outcome.retry("the SMTP server did not answer in time")
    except ConnectionRefusedError:
        return Outcome.retry("connection refused")
    except ssl.SSLError:
        return Outcome.retry("TLS handshake failed")
    except (smtplib.SMTPException, OSError) as error:
        return Outcome.retry(f"SMTP failed ({type(error).__name__})")
    return Outcome.delivered(f"accepted by {settings.smtp_host}")


def _hand_over(settings, mail: EmailMessage) -> None:
    smtp = _connect(settings)
    try:
        if settings.smtp_user:
            smtp.login(settings.smtp_user, settings.smtp_password or "")
        smtp.send_message(mail)
        with suppress(smtplib.SMTPException, OSError):  # the message is accepted: a lost goodbye changes nothing
            smtp.quit()
    finally:
        smtp.close()  # after a refusal, no QUIT: a server that stopped answering must not hide the refusal


def _connect(settings) -> smtplib.SMTP:
    host, port = settings.smtp_host, settings.smtp_port
    if settings.smtp_security == "tls":
        return smtplib.SMTP_SSL(host, port, timeout=TIMEOUT, context=ssl.create_default_context())
    smtp = smtplib.SMTP(host, port, timeout=TIMEOUT)
    if settings.smtp_security == "starttls":
        try:
            smtp.starttls(context=ssl.create_default_context())
        except BaseException:
            smtp.close()
            raise
    return smtp


def _reply_outcome(code: int, reply) -> Outcome:
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    detail = f"SMTP {code} {' '.join(text.split())}"
    return Outcome.stop(detail) if 500 <= code < 600 else Outcome.retry(detail)

//! The mail channel over SMTP (lettre): STARTTLS (default), TLS from the
//! first byte, or plain for a relay on localhost; login when a user is
//! configured, the password from the environment variable the config
//! names. Three attempts with back-off.

use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use crate::config::{SmtpConfig, SmtpTls};
use crate::notify::{Delivery, Message};

fn transport(cfg: &SmtpConfig) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let tls = cfg.tls.unwrap_or(SmtpTls::Starttls);
    let b = match tls {
        SmtpTls::Starttls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&cfg.server)
            .map_err(|e| e.to_string())?,
        SmtpTls::Tls => {
            AsyncSmtpTransport::<Tokio1Executor>::relay(&cfg.server).map_err(|e| e.to_string())?
        }
        SmtpTls::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&cfg.server),
    };
    let port = cfg.port.unwrap_or(match tls {
        SmtpTls::Starttls => 587,
        SmtpTls::Tls => 465,
        SmtpTls::None => 25,
    });
    let mut b = b.port(port).timeout(Some(Duration::from_secs(15)));
    if let Some(user) = &cfg.user {
        let pass = match &cfg.password_env {
            Some(var) => std::env::var(var)
                .map_err(|_| format!("notify.smtp.password_env: ${var} is not set"))?,
            None => String::new(),
        };
        b = b.credentials(Credentials::new(user.clone(), pass));
    }
    Ok(b.build())
}

fn email(cfg: &SmtpConfig, m: &Message) -> Result<lettre::Message, String> {
    let mut b = lettre::Message::builder()
        .from(
            cfg.from
                .parse()
                .map_err(|e| format!("notify.smtp.from {:?}: {e}", cfg.from))?,
        )
        .subject(m.subject.clone())
        .header(ContentType::TEXT_PLAIN);
    for to in &cfg.to {
        b = b.to(to
            .parse()
            .map_err(|e| format!("notify.smtp.to {to:?}: {e}"))?);
    }
    b.body(m.text.clone()).map_err(|e| e.to_string())
}

pub async fn send(cfg: &SmtpConfig, m: &Message) -> Delivery {
    let fail = |detail: String| Delivery {
        channel: "smtp".into(),
        ok: false,
        detail,
    };
    let (t, mail) = match (transport(cfg), email(cfg, m)) {
        (Ok(t), Ok(mail)) => (t, mail),
        (Err(e), _) | (_, Err(e)) => return fail(e),
    };
    let mut last = String::new();
    for i in 0..3u32 {
        if i > 0 {
            tokio::time::sleep(Duration::from_secs(2u64.pow(i))).await;
        }
        match t.send(mail.clone()).await {
            Ok(r) => {
                return Delivery {
                    channel: "smtp".into(),
                    ok: true,
                    detail: format!(
                        "{}:{} accepted it ({})",
                        cfg.server,
                        cfg.port.unwrap_or(0),
                        r.code()
                    ),
                }
            }
            Err(e) => last = e.to_string(),
        }
    }
    fail(format!("{} after 3 attempts: {last}", cfg.server))
}
